"""What the host knows about each cache row, without reading the device.

Rows are the decode slots (0 .. slots-1) followed by the prefix store's rows. Two uses.

(1) Prefix reuse. A finished sequence's row stays in its slot, frozen, until the slot is given to
another request; just before that, the engine moves it to the store (`save_target`), which keeps
the least recently used rows when full. The ledger keeps the token ids each row holds, so a later
prompt that extends them (the next turn of an episode: the same ids plus the tool results) is
prefilled only from where they differ. Every overwrite of a row bumps its epoch: a reuse planned
on a row that has since been overwritten (evicted) is noticed at insert and falls back to a full
prefill.

New weights (`new_weights`) end every reuse: cached keys and values belong to the old ones.

(2) An upper bound on each live slot's length, so that decode attends only over the used part of
the cache.

Threads: the generate thread inserts, saves and dispatches, the detokenize thread appends and
finishes, the prefill thread looks up; one lock guards it all.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Reuse:
  """Extend row `row`'s cache (as of its overwrite number `epoch`) from its first `length` tokens."""

  row: int
  epoch: int
  length: int


@dataclasses.dataclass
class _Row:
  epoch: int = 0
  weights: int = 0  # which weights computed it (see `new_weights`)
  tokens: list[int] = dataclasses.field(default_factory=list)
  frozen: bool = False  # holds a finished sequence the device no longer writes to
  bound: int = 0  # a slot's upper bound on its length while it decodes; 0 when not decoding
  used: int = 0  # when it was last written or reused (least recently used leaves the store first)


class SlotLedger:
  def __init__(self, slots: int, store_rows: int, max_length: int):
    self.slots = slots
    self.max_length = max_length
    self._rows = [_Row() for _ in range(slots + store_rows)]
    self._clock = itertools.count(1)
    self._weights = 0
    self._lock = threading.Lock()

  def in_store(self, row: int) -> bool:
    return row >= self.slots

  def _write(self, row: int, tokens: Sequence[int], frozen: bool, bound: int) -> None:
    entry = self._rows[row]
    entry.epoch += 1
    entry.weights = self._weights
    entry.tokens, entry.frozen, entry.bound, entry.used = list(tokens), frozen, bound, next(self._clock)

  def inserted(self, slot: int, tokens: Sequence[int]) -> None:
    """A new sequence holding `tokens` now decodes in `slot`."""
    with self._lock:
      self._write(slot, tokens, frozen=False, bound=len(tokens))

  def cleared(self, slot: int) -> None:
    """The slot holds nothing reusable and decodes nothing (a failed request)."""
    with self._lock:
      self._write(slot, [], frozen=False, bound=0)

  def new_weights(self) -> None:
    """The engine serves new weights: no cached row may be reused, and a sequence decoding now
    (part old, part new) is not kept when it finishes."""
    with self._lock:
      self._weights += 1
      for row in self._rows:
        if row.frozen:
          row.epoch, row.frozen, row.tokens = row.epoch + 1, False, []

  def forget(self) -> None:
    """Every row lost (the decode state was rebuilt)."""
    with self._lock:
      for row in range(len(self._rows)):
        self._write(row, [], frozen=False, bound=0)

  def appended(self, slot: int, tokens: Sequence[int], finished: bool, frozen: bool) -> None:
    """Tokens fed to the model in `slot`; `frozen` once the device stopped writing the row."""
    with self._lock:
      row = self._rows[slot]
      row.tokens.extend(int(t) for t in tokens)
      if finished:
        row.frozen = frozen and row.weights == self._weights
        row.bound, row.used = 0, next(self._clock)

  def save_target(self, slot: int, min_length: int, keep: int | None = None) -> int | None:
    """Before `slot` is overwritten: the store row to copy its finished sequence into (an empty
    or the least recently used one other than `keep`, now recorded as holding it), or None
    (nothing worth keeping, or no store)."""
    with self._lock:
      row = self._rows[slot]
      store = [r for r in range(self.slots, len(self._rows)) if r != keep]
      if not store or not row.frozen or len(row.tokens) < min_length:
        return None
      target = min(store, key=lambda r: (self._rows[r].frozen, self._rows[r].used))
      self._write(target, row.tokens, frozen=True, bound=0)  # same weights: checked when frozen
      return target

  def dispatched(self, steps: int) -> int:
    """Records a decode dispatch of `steps` steps; returns how much of the cache it can touch."""
    with self._lock:
      live = self._rows[:self.slots]
      used = max(row.bound for row in live) + steps
      for row in live:
        if row.bound:
          row.bound = min(row.bound + steps, self.max_length)
    return min(used, self.max_length)

  def longest_prefix(self, ids: np.ndarray, min_length: int) -> Reuse | None:
    """The frozen row sharing the longest prefix with `ids` (at least `min_length` tokens, and
    leaving at least one token of `ids` to prefill), if any."""
    best = None
    with self._lock:
      for index, row in enumerate(self._rows):
        if not row.frozen or not row.tokens:
          continue
        common = min(len(row.tokens), len(ids) - 1)
        mismatch = np.flatnonzero(np.asarray(row.tokens[:common]) != ids[:common])
        length = int(mismatch[0]) if mismatch.size else common
        if length >= min_length and (best is None or length > best.length):
          best = Reuse(index, row.epoch, length)
    return best

  def take(self, reuse: Reuse) -> bool:
    """Whether the row `reuse` was planned on is still there, unchanged (and marks it used)."""
    with self._lock:
      row = self._rows[reuse.row]
      if not (row.frozen and row.epoch == reuse.epoch):
        return False
      row.used = next(self._clock)
      return True
