"""Tokenizers, the Qwen3 chat template, append-only episodes and the tool-call parser."""

from toolorch_jax.tokenizer.base import CHAT_TOKENS, Tokenizer
from toolorch_jax.tokenizer.chat_template import render_chat
from toolorch_jax.tokenizer.episode import ChatEpisode
from toolorch_jax.tokenizer.loading import load_tokenizer
from toolorch_jax.tokenizer.qwen import QwenTokenizer
from toolorch_jax.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece
from toolorch_jax.tokenizer.tool_calls import ParsedAssistant, ToolCall, ToolCallError, parse_assistant

__all__ = [
    "CHAT_TOKENS", "ChatEpisode", "ParsedAssistant", "QwenTokenizer", "SentencePieceTokenizer",
    "ToolCall", "ToolCallError", "Tokenizer", "load_tokenizer", "parse_assistant", "render_chat",
    "train_sentencepiece",
]
