"""Tokenizers, the Qwen3 chat template, append-only transcripts and the tool-call parser."""

from toolorch_jax.tokenizer.base import CHAT_TOKENS, Tokenizer
from toolorch_jax.tokenizer.chat_template import render_chat
from toolorch_jax.tokenizer.loading import load_tokenizer
from toolorch_jax.tokenizer.qwen import QwenTokenizer
from toolorch_jax.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece
from toolorch_jax.tokenizer.tool_calls import ParsedAssistant, ParseError, ToolCallError, parse_assistant
from toolorch_jax.tokenizer.transcript import Transcript

__all__ = [
    "CHAT_TOKENS", "ParseError", "ParsedAssistant", "QwenTokenizer", "SentencePieceTokenizer",
    "ToolCallError", "Tokenizer", "Transcript", "load_tokenizer", "parse_assistant", "render_chat",
    "train_sentencepiece",
]
