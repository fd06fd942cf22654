"""Qwen3's byte-level BPE through Hugging Face `tokenizers`.

Built from a checkpoint's `tokenizer.json`, or from `vocab.json` + `merges.txt` +
`tokenizer_config.json` (what `../shared/data/qwen3/` holds): NFC normalisation, Qwen2's
pre-tokenisation split, byte-level BPE and the added tokens with their special flags. The tests
check the ids against transformers' Qwen2 tokenizer built from the same files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from toolorch_jax.tokenizer.base import CHAT_TOKENS, ENDOFTEXT, IM_END

# Qwen2/Qwen3 pre-tokenisation: contractions, letter runs with one leading non-letter, single
# digits, punctuation runs, newlines, and whitespace.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_from_vocab(directory: Path) -> HFTokenizer:
  """The Qwen2-style tokenizer from vocab.json, merges.txt and tokenizer_config.json."""
  vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
  merges = []
  for line in (directory / "merges.txt").read_text(encoding="utf-8").splitlines():
    if line and not line.startswith("#version"):
      left, right = line.split(" ")
      merges.append((left, right))
  tokenizer = HFTokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None,
                                     fuse_unk=False, byte_fallback=False))
  tokenizer.normalizer = normalizers.NFC()
  tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
      pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
  ])
  tokenizer.decoder = decoders.ByteLevel()
  config_file = directory / "tokenizer_config.json"
  added = json.loads(config_file.read_text())["added_tokens_decoder"] if config_file.is_file() else {}
  for token_id, spec in sorted(added.items(), key=lambda item: int(item[0])):
    token = AddedToken(spec["content"], single_word=spec.get("single_word", False),
                       lstrip=spec.get("lstrip", False), rstrip=spec.get("rstrip", False),
                       normalized=spec.get("normalized", False), special=spec.get("special", False))
    tokenizer.add_tokens([token])
    if tokenizer.token_to_id(spec["content"]) != int(token_id):
      raise ValueError(f"{config_file}: added token {spec['content']!r} got id"
                       f" {tokenizer.token_to_id(spec['content'])}, expected {token_id}")
  return tokenizer


class QwenTokenizer:
  """`Tokenizer` over an HF `tokenizers` object with Qwen3's chat tokens."""

  def __init__(self, tokenizer: HFTokenizer, source: str = ""):
    self._tokenizer = tokenizer
    self.source = source
    missing = [t for t in CHAT_TOKENS if tokenizer.token_to_id(t) is None]
    if missing:
      raise ValueError(f"{source}: tokenizer lacks the chat tokens {missing}")

  @classmethod
  def from_directory(cls, directory: str | Path) -> "QwenTokenizer":
    directory = Path(directory)
    if (directory / "tokenizer.json").is_file():
      return cls(HFTokenizer.from_file(str(directory / "tokenizer.json")), str(directory))
    return cls(build_from_vocab(directory), str(directory))

  @property
  def vocab_size(self) -> int:
    return self._tokenizer.get_vocab_size(with_added_tokens=True)

  @property
  def eos_id(self) -> int:
    return self._tokenizer.token_to_id(IM_END)

  @property
  def pad_id(self) -> int:
    return self._tokenizer.token_to_id(ENDOFTEXT)

  @property
  def stop_ids(self) -> tuple[int, ...]:
    return (self.eos_id, self.pad_id)

  def special_ids(self) -> dict[str, int]:
    return {t: self._tokenizer.token_to_id(t) for t in CHAT_TOKENS}

  def token_to_id(self, token: str) -> int | None:
    return self._tokenizer.token_to_id(token)

  def encode(self, text: str) -> list[int]:
    return self._tokenizer.encode(text, add_special_tokens=False).ids

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
