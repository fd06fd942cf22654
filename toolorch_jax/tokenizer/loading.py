"""`load_tokenizer(path)`: picks the backend from what the path holds."""

from __future__ import annotations

from pathlib import Path

from toolorch_jax.tokenizer.base import Tokenizer
from toolorch_jax.tokenizer.qwen import QwenTokenizer
from toolorch_jax.tokenizer.sentencepiece_tokenizer import MODEL_FILE, SentencePieceTokenizer


def load_tokenizer(path: str | Path) -> Tokenizer:
  """A directory with tokenizer.json, or vocab.json + merges.txt (+ tokenizer_config.json), or a
  SentencePiece model (a `.model` file or a directory holding tokenizer.model)."""
  path = Path(path)
  if path.is_file() and path.suffix == ".model":
    return SentencePieceTokenizer(path)
  if path.is_dir():
    if (path / MODEL_FILE).is_file():
      return SentencePieceTokenizer(path / MODEL_FILE)
    if (path / "tokenizer.json").is_file() or (
        (path / "vocab.json").is_file() and (path / "merges.txt").is_file()):
      return QwenTokenizer.from_directory(path)
  raise FileNotFoundError(f"{path}: no tokenizer found (expected tokenizer.json, vocab.json +"
                          f" merges.txt, or a SentencePiece {MODEL_FILE})")
