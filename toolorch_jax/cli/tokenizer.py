"""`toolorch tokenizer train|encode`: train a SentencePiece tokenizer, inspect any tokenizer."""

from __future__ import annotations

import argparse
import json

from toolorch_jax.cli.parsers import add_command, add_group
from toolorch_jax.config import ConfigError

MIN_VOCAB = 64  # the chat and tool tokens, bytes and a few merges


def cmd_train(args: argparse.Namespace) -> int:
  """Train a byte-fallback SentencePiece BPE whose chat and tool tokens (<|im_start|>,
  <tool_call>, ...) are single pieces."""
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
  """Encode TEXT with a tokenizer directory or .model file and print its ids and pieces."""
  from toolorch_jax.tokenizer import load_tokenizer

  tokenizer = load_tokenizer(args.tokenizer)
  ids = tokenizer.encode(args.text)
  print(json.dumps({"ids": ids, "pieces": [tokenizer.decode([i]) for i in ids]}, ensure_ascii=False))
  return 0


def add_parsers(subparsers) -> None:
  actions = add_group(subparsers, "tokenizer", "train a SentencePiece tokenizer, or inspect any")
  train = add_command(actions, "train", cmd_train, "train a SentencePiece tokenizer on a corpus")
  train.add_argument("--corpus", required=True, help="text file (one sentence a line) or .jsonl")
  train.add_argument("--field", default="text", help="field of each .jsonl record (default: text)")
  train.add_argument("--vocab-size", type=int, required=True, help="number of pieces")
  train.add_argument("--out", required=True, help="output directory for tokenizer.model")
  encode = add_command(actions, "encode", cmd_encode, "print the ids and pieces of a text")
  encode.add_argument("tokenizer", help="tokenizer directory or SentencePiece .model file")
  encode.add_argument("text", help="text to encode")
