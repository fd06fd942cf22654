"""Packing variable-length episodes into fixed rows for the train step.

Each sample (an episode's tokens, or a demonstration's) becomes (inputs, next-token targets, loss
mask on policy targets, its advantage per token, rollout log-probs), and samples are packed
first-fit-decreasing into rows of `seq_len` tokens with segment ids, so attention stays inside a
sample and no compute is spent on padding beyond the last row. The row count is rounded up to whole
micro-batches.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass
class Sample:
  """One sequence to train on, and what the loss needs per token."""

  ids: Sequence[int]
  loss_mask: Sequence[int]  # 1 where the token was produced by the policy
  advantage: float = 0.0
  logprobs: Sequence[float] | None = None  # sampling log-probs aligned with ids (0 off-policy)


@dataclasses.dataclass
class PackedBatch:
  tokens: np.ndarray  # [R, L] int32 inputs
  targets: np.ndarray  # [R, L] int32 next tokens
  positions: np.ndarray  # [R, L] int32, restart per sample
  segments: np.ndarray  # [R, L] int32, 1.. per sample in a row, 0 = padding
  loss_mask: np.ndarray  # [R, L] float32: target is a policy token
  advantages: np.ndarray  # [R, L] float32
  rollout_logp: np.ndarray  # [R, L] float32: sampling log-prob of the target
  num_tokens: int  # loss tokens in the whole batch
  num_sequences: int
  truncated: int  # samples longer than a row, cut to fit

  def micro_batches(self, count: int) -> dict[str, np.ndarray]:
    """Arrays reshaped to [count, R / count, L] for the train step's scan."""
    fields = ("tokens", "targets", "positions", "segments", "loss_mask", "advantages", "rollout_logp")
    rows = self.tokens.shape[0]
    return {f: getattr(self, f).reshape(count, rows // count, -1) for f in fields}


def pack(sequences: Sequence[Sample], seq_len: int, rows_multiple: int = 1,
         pad_id: int = 0) -> PackedBatch:
  items = []
  truncated = 0
  for seq in sequences:
    ids = np.asarray(seq.ids, np.int32)
    mask = np.asarray(seq.loss_mask, np.float32)
    logp = np.zeros(len(ids), np.float32) if seq.logprobs is None else np.asarray(seq.logprobs, np.float32)
    if len(ids) < 2:
      continue
    n = min(len(ids) - 1, seq_len)
    truncated += int(len(ids) - 1 > seq_len)
    items.append((n, ids[:n], ids[1:n + 1], mask[1:n + 1], logp[1:n + 1], float(seq.advantage)))
  free: list[int] = []  # remaining room per row
  order = sorted(range(len(items)), key=lambda i: -items[i][0])
  where = {}
  for i in order:
    n = items[i][0]
    row = next((r for r, room in enumerate(free) if room >= n), None)
    if row is None:
      free.append(seq_len)
      row = len(free) - 1
    where[i] = (row, seq_len - free[row])
    free[row] -= n
  rows = max(1, -(-len(free) // rows_multiple) * rows_multiple)
  batch = PackedBatch(
      tokens=np.full((rows, seq_len), pad_id, np.int32), targets=np.full((rows, seq_len), pad_id, np.int32),
      positions=np.zeros((rows, seq_len), np.int32), segments=np.zeros((rows, seq_len), np.int32),
      loss_mask=np.zeros((rows, seq_len), np.float32), advantages=np.zeros((rows, seq_len), np.float32),
      rollout_logp=np.zeros((rows, seq_len), np.float32), num_tokens=0, num_sequences=len(items),
      truncated=truncated)
  next_segment = [1] * rows
  for i in sorted(where, key=lambda i: where[i]):
    n, inputs, targets, mask, logp, advantage = items[i]
    row, offset = where[i]
    span = slice(offset, offset + n)
    batch.tokens[row, span], batch.targets[row, span] = inputs, targets
    batch.positions[row, span] = np.arange(n)
    batch.segments[row, span] = next_segment[row]
    next_segment[row] += 1
    batch.loss_mask[row, span], batch.rollout_logp[row, span] = mask, logp
    batch.advantages[row, span] = advantage
  batch.num_tokens = int(batch.loss_mask.sum())
  return batch
