"""`toolorch tokenizer train|encode`: train a SentencePiece tokenizer, inspect any tokenizer."""

from __future__ import annotations

import argparse
import json

from toolorch_jax.config import ConfigError

MIN_VOCAB = 64  # the chat and tool tokens, bytes and a few merges


def cmd_train(args: argparse.Namespace) -> int:
  from toolorch_jax.data.jsonl import read_texts
  from toolorch_jax.tokenizer import load_tokenizer, train_sentencepiece

  if args.vocab_size < MIN_VOCAB:
    raise ConfigError(f"--vocab-size must be at least {MIN_VOCAB}, got {args.vocab_size}")
  path = train_sentencepiece(read_texts(args.corpus, args.field, "--corpus"), args.vocab_size,
                             args.out)
  tokenizer = load_tokenizer(path)
  print(f"wrote {path}: {tokenizer.vocab_size} pieces; chat tokens {tokenizer.special_ids()}")
  return 0


def cmd_encode(args: argparse.Namespace) -> int:
  from toolorch_jax.tokenizer import load_tokenizer

  tokenizer = load_tokenizer(args.tokenizer)
  ids = tokenizer.encode(args.text)
  print(json.dumps({"ids": ids, "pieces": [tokenizer.decode([i]) for i in ids]}, ensure_ascii=False))
  return 0


def add_parsers(subparsers) -> None:
  parser = subparsers.add_parser("tokenizer", help="train or inspect tokenizers",
                                 description="Train a SentencePiece tokenizer with Qwen3's chat and"
                                 " tool tokens, or encode text with any tokenizer.")
  sub = parser.add_subparsers(dest="tokenizer_command", required=True, metavar="ACTION")
  train = sub.add_parser("train", help="train a SentencePiece tokenizer on a corpus",
                         description="Train a byte-fallback SentencePiece BPE whose chat and tool"
                         " tokens (<|im_start|>, <tool_call>, ...) are single pieces.")
  train.add_argument("--corpus", required=True, help="text file (one sentence a line) or .jsonl")
  train.add_argument("--field", default="text", help="field of each .jsonl record (default: text)")
  train.add_argument("--vocab-size", type=int, required=True, help="number of pieces")
  train.add_argument("--out", required=True, help="output directory for tokenizer.model")
  train.set_defaults(func=cmd_train)
  encode = sub.add_parser("encode", help="print the ids and pieces of a text",
                          description="Encode TEXT with a tokenizer directory or .model file.")
  encode.add_argument("tokenizer", help="tokenizer directory or SentencePiece .model file")
  encode.add_argument("text", help="text to encode")
  encode.set_defaults(func=cmd_encode)
