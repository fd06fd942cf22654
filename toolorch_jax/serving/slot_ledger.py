"""What the host knows about each decode slot's cache row, without reading the device.

Two uses. (1) Prefix reuse: a finished sequence's row stays in its slot, frozen, until the slot is
given to another request; the ledger keeps the token ids that row holds, so a later prompt that
extends them (the next turn of a multi-turn episode: the same ids plus the tool results) is
prefilled only from where they differ. Every insert into a slot bumps its epoch, which is how a
reuse planned on a row that has since been overwritten (evicted) is noticed and falls back to a
full prefill. (2) An upper bound on each live row's length, so that decode attends only over the
used part of the cache.

Threads: the generate thread inserts and dispatches, the detokenize thread appends and finishes,
the prefill thread looks up; one lock guards it all.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Reuse:
  """Extend slot `slot`'s row (as of insert number `epoch`) from its first `length` tokens."""

  slot: int
  epoch: int
  length: int


@dataclasses.dataclass
class _Row:
  epoch: int = 0
  tokens: list[int] = dataclasses.field(default_factory=list)
  frozen: bool = False  # finished, and the device no longer writes to it
  bound: int = 0  # upper bound on the row's length while it decodes; 0 when not decoding


class SlotLedger:
  def __init__(self, slots: int, max_length: int):
    self.max_length = max_length
    self._rows = [_Row() for _ in range(slots)]
    self._lock = threading.Lock()

  def inserted(self, slot: int, tokens: Sequence[int]) -> None:
    """A new sequence holding `tokens` now decodes in `slot`."""
    with self._lock:
      row = self._rows[slot]
      row.epoch += 1
      row.tokens, row.frozen, row.bound = list(tokens), False, len(tokens)

  def cleared(self, slot: int) -> None:
    """The slot holds nothing reusable and decodes nothing (a failed request)."""
    with self._lock:
      row = self._rows[slot]
      row.epoch += 1
      row.tokens, row.frozen, row.bound = [], False, 0

  def appended(self, slot: int, tokens: Sequence[int], finished: bool, frozen: bool) -> None:
    """Tokens fed to the model in `slot`; `frozen` once the device stopped writing the row."""
    with self._lock:
      row = self._rows[slot]
      row.tokens.extend(int(t) for t in tokens)
      if finished:
        row.frozen, row.bound = frozen, 0

  def dispatched(self, steps: int) -> int:
    """Records a decode dispatch of `steps` steps; returns how much of the cache it can touch."""
    with self._lock:
      used = max(row.bound for row in self._rows) + steps
      for row in self._rows:
        if row.bound:
          row.bound = min(row.bound + steps, self.max_length)
    return min(used, self.max_length)

  def longest_prefix(self, ids: np.ndarray, min_length: int) -> Reuse | None:
    """The frozen row sharing the longest prefix with `ids` (at least `min_length` tokens, and
    leaving at least one token of `ids` to prefill), if any."""
    best = None
    with self._lock:
      for slot, row in enumerate(self._rows):
        if not row.frozen or not row.tokens:
          continue
        common = min(len(row.tokens), len(ids) - 1)
        held = np.asarray(row.tokens[:common])
        mismatch = np.flatnonzero(held != ids[:common])
        length = int(mismatch[0]) if mismatch.size else common
        if length >= min_length and (best is None or length > best.length):
          best = Reuse(slot, row.epoch, length)
    return best

  def holds(self, reuse: Reuse) -> bool:
    """Whether the row `reuse` was planned on is still there, unchanged."""
    with self._lock:
      row = self._rows[reuse.slot]
      return row.frozen and row.epoch == reuse.epoch
