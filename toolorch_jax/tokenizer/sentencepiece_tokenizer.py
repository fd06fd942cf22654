"""SentencePiece tokenizers for the project's own small models.

Trained with Qwen3's chat and tool tokens as user-defined symbols (always one piece each), byte
fallback (any text encodes), and no normalisation or whitespace folding, so that decode(encode(x))
== x and the same chat template and parser work for a tiny model trained on CPU.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable, Sequence

import sentencepiece as spm

from toolorch_jax.tokenizer.base import CHAT_TOKENS, CONTROL_TOKENS, ENDOFTEXT, IM_END

MODEL_FILE = "tokenizer.model"


def train_sentencepiece(lines: Iterable[str], vocab_size: int, out_dir: str | Path,
                        model_type: str = "bpe", max_piece_length: int = 16,
                        split_by_whitespace: bool = True) -> Path:
  """Trains on `lines` (one sentence each) and writes `out_dir/tokenizer.model`.

  Long pieces that cross whitespace (`max_piece_length`, `split_by_whitespace=False`) suit a
  narrow domain whose prompts repeat whole phrases: they make prompts several times shorter.
  """
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  model = io.BytesIO()
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(lines),
      model_writer=model,
      vocab_size=vocab_size,
      model_type=model_type,
      user_defined_symbols=list(CHAT_TOKENS) + ["\n"],
      byte_fallback=True,
      normalization_rule_name="identity",
      remove_extra_whitespaces=False,
      add_dummy_prefix=False,
      split_digits=True,
      max_sentencepiece_length=max_piece_length,
      split_by_whitespace=split_by_whitespace,
      split_by_unicode_script=split_by_whitespace,
      allow_whitespace_only_pieces=True,
      character_coverage=1.0,
      max_sentence_length=1 << 16,
      unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
      hard_vocab_limit=False,
      minloglevel=2,
  )
  path = out / MODEL_FILE
  path.write_bytes(model.getvalue())
  return path


class SentencePieceTokenizer:
  """`Tokenizer` over a SentencePiece model trained by `train_sentencepiece`."""

  def __init__(self, model_file: str | Path):
    self.source = str(model_file)
    self._sp = spm.SentencePieceProcessor(model_file=str(model_file))
    missing = [t for t in CHAT_TOKENS if self.token_to_id(t) is None]
    if missing:
      raise ValueError(f"{model_file}: SentencePiece model lacks the chat tokens {missing}")

  @property
  def vocab_size(self) -> int:
    return self._sp.get_piece_size()

  @property
  def eos_id(self) -> int:
    return self._sp.piece_to_id(IM_END)

  @property
  def pad_id(self) -> int:
    return self._sp.piece_to_id(ENDOFTEXT)

  @property
  def stop_ids(self) -> tuple[int, ...]:
    return (self.eos_id, self.pad_id)

  def special_ids(self) -> dict[str, int]:
    return {t: self._sp.piece_to_id(t) for t in CHAT_TOKENS}

  def token_to_id(self, token: str) -> int | None:
    token_id = self._sp.piece_to_id(token)
    return None if token_id == self._sp.unk_id() and token != self._sp.id_to_piece(token_id) else token_id

  def encode(self, text: str) -> list[int]:
    return self._sp.encode(text)

  def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
    ids = [int(i) for i in ids]
    if skip_special_tokens:  # like Qwen3: drop turn delimiters, keep <think>/<tool_call> tags
      control = {self._sp.piece_to_id(t) for t in CONTROL_TOKENS}
      ids = [i for i in ids if i not in control]
    return self._sp.decode(ids)
