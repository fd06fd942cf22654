"""Packing episodes into fixed rows for the train step, every shared prefix once.

The episodes of a group start with the same prompt (and often the same first turns), so samples
are packed as prefix trees: in sorted order, each sample joins the row whose last sample shares
the longest prefix with it (among rows with room for the rest) and adds only the tokens after
that prefix. A row lays its trees out depth first, and `subtree_ends` tells the model which keys
each token sees (its ancestors), so every sample gets exactly the logits it would get alone.
Without sharing, each sample is a tree of its own, packed first-fit-decreasing.

The loss reads logits only where a target is a policy token: `loss_columns`/`targets` name each
distinct (column, next token) of a row once, and the row's entries (one per sample through it,
with its own advantage and rollout log-prob) point at them. The row count is rounded up to whole
micro-batches and the loss arrays' widths to powers of two (at least the widths a trainer passes:
those it has compiled for), so a run compiles few programs.
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
  positions: np.ndarray  # [R, L] int32: each token's position in its sample
  subtree_ends: np.ndarray  # [R, L] int32: last column of the subtree under each token, -1 = padding
  loss_columns: np.ndarray  # [R, P] int32: columns whose logits a target reads
  targets: np.ndarray  # [R, P] int32: the next token read there
  entry_index: np.ndarray  # [R, E] int32: each loss entry's target (index into P)
  loss_mask: np.ndarray  # [R, E] float32: 1 for an entry, 0 = padding
  advantages: np.ndarray  # [R, E] float32
  rollout_logp: np.ndarray  # [R, E] float32: sampling log-prob of the entry's target
  sequence_ids: np.ndarray  # [R, E] int32: the entry's sample within its row, 1.., 0 = padding
  num_tokens: int  # loss entries in the whole batch (the samples' policy tokens)
  num_sequences: int
  truncated: int  # samples longer than a row, cut to fit
  sample_tokens: int  # input tokens of the samples, as if each were packed alone
  packed_tokens: int  # columns they take with their prefixes shared
  pad_id: int = 0

  FIELDS = ("tokens", "positions", "subtree_ends", "loss_columns", "targets", "entry_index",
            "loss_mask", "advantages", "rollout_logp", "sequence_ids")

  def micro_batches(self, count: int) -> dict[str, np.ndarray]:
    """Arrays reshaped to [count, R / count, ...] for the train step's micro-batches."""
    rows = self.tokens.shape[0]
    return {f: getattr(self, f).reshape(count, rows // count, -1) for f in self.FIELDS}

  def padded(self, multiple: int) -> "PackedBatch":
    """The batch with empty rows added up to a multiple of `multiple` rows (never attended to, no
    loss entries)."""
    extra = -self.tokens.shape[0] % multiple
    fill = {"subtree_ends": -1, "tokens": self.pad_id, "targets": self.pad_id}
    return dataclasses.replace(self, **{f: np.pad(getattr(self, f), ((0, extra), (0, 0)),
                                                  constant_values=fill.get(f, 0))
                                        for f in self.FIELDS})


def micro_batch_rows(rows: int, most: int, least: int = 1) -> int:
  """Rows per micro-batch for a batch of `rows`: the largest of `most` and its halvings (down to
  `least`, the devices the rows are split over) that pads the batch by at most an eighth or by
  one row, else the smallest. A step then never computes micro-batches of mostly empty rows, and
  a run compiles only a few micro-batch shapes: each new size is a compile of the whole gradient
  program, which on a small model costs more than a padded row (at `most` = 2 every batch takes
  2, where a batch of odd rows would otherwise fall to micro-batches of one)."""
  sizes = [most]
  while sizes[-1] % 2 == 0 and sizes[-1] // 2 >= least:
    sizes.append(sizes[-1] // 2)
  padding = lambda size: -(-rows // size) * size - rows
  return next((size for size in sizes if padding(size) * 8 <= rows or padding(size) <= 1),
              sizes[-1])


@dataclasses.dataclass
class _Item:
  inputs: np.ndarray  # ids[:n]
  next_ids: np.ndarray  # ids[1:n + 1]: the target of each input
  mask: np.ndarray  # loss mask of the targets
  logp: np.ndarray  # rollout log-probs of the targets
  advantage: float


@dataclasses.dataclass
class _Row:
  used: int = 0
  last: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))  # inputs
  path: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # their columns


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
  n = min(len(a), len(b))
  differ = np.flatnonzero(a[:n] != b[:n])
  return int(differ[0]) if differ.size else n


def _power_of_two(n: int) -> int:
  return 1 << max(0, n - 1).bit_length()


def _loss_width(row_lengths, least: int) -> int:
  """A loss array's width: its longest row rounded up to a power of two, at least `least`."""
  return max(least, _power_of_two(max(row_lengths, default=1)))


def _items(samples: Sequence[Sample], seq_len: int) -> tuple[list[_Item], int]:
  items, truncated = [], 0
  for sample in samples:
    ids = np.asarray(sample.ids, np.int32)
    if len(ids) < 2:
      continue
    mask = np.asarray(sample.loss_mask, np.float32)
    logp = (np.zeros(len(ids), np.float32) if sample.logprobs is None
            else np.asarray(sample.logprobs, np.float32))
    n = min(len(ids) - 1, seq_len)
    truncated += int(len(ids) - 1 > seq_len)
    items.append(_Item(ids[:n], ids[1:n + 1], mask[1:n + 1], logp[1:n + 1], float(sample.advantage)))
  return items, truncated


def _place(items: list[_Item], seq_len: int, share_prefixes: bool) -> tuple[int, list]:
  """(row count, [(row, item, the columns of its inputs)]): with sharing, in sorted order each
  item joins the row (with room) whose last item shares the longest prefix with it, and only its
  tokens after that prefix take new columns; without, first-fit-decreasing."""
  if share_prefixes:  # sorted, an item's longest shared prefix in a row is with its last item
    order = sorted(range(len(items)), key=lambda i: items[i].inputs.tolist())
  else:
    order = sorted(range(len(items)), key=lambda i: -len(items[i].inputs))
  rows: list[_Row] = []
  placed = []
  for i in order:
    item = items[i]
    n = len(item.inputs)
    best, shared = None, -1
    for r, row in enumerate(rows):
      if row.used + n - (min(n, len(row.last)) if share_prefixes else 0) > seq_len:
        continue  # full even if all it could share were shared
      k = _common_prefix(row.last, item.inputs) if share_prefixes else 0
      if row.used + n - k <= seq_len and k > shared:
        best, shared = r, k
    if best is None:
      rows.append(_Row())
      best, shared = len(rows) - 1, 0
    row = rows[best]
    path = np.concatenate([row.path[:shared], np.arange(row.used, row.used + n - shared)])
    row.used, row.last, row.path = row.used + n - shared, item.inputs, path
    placed.append((best, item, path))
  return len(rows), placed


def pack(sequences: Sequence[Sample], seq_len: int, rows_multiple: int = 1, pad_id: int = 0,
         share_prefixes: bool = True, least_widths: tuple[int, int] = (1, 1)) -> PackedBatch:
  """`sequences` packed into rows of `seq_len`; the loss arrays are at least `least_widths`
  (targets, entries) wide, so a trainer that passes the widths it has compiled for reuses them."""
  items, truncated = _items(sequences, seq_len)
  used_rows, placed = _place(items, seq_len, share_prefixes)
  count = max(1, -(-used_rows // rows_multiple) * rows_multiple)
  tokens = np.full((count, seq_len), pad_id, np.int32)
  positions = np.zeros((count, seq_len), np.int32)
  ends = np.full((count, seq_len), -1, np.int32)
  # per row: (columns, targets, advantages, rollout log-probs, sequence ids) of its entries
  parts: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(count)]
  for r, item, path in placed:
    tokens[r, path], positions[r, path] = item.inputs, np.arange(len(path))
    ends[r, path] = np.maximum(ends[r, path], path[-1])  # every node on it now reaches its end
    policy = np.flatnonzero(item.mask > 0)
    if policy.size:
      parts[r].append((path[policy], item.next_ids[policy], np.full(policy.size, item.advantage),
                       item.logp[policy], np.full(policy.size, len(parts[r]) + 1)))
  entries = [tuple(np.concatenate(f) for f in zip(*p)) if p else None for p in parts]
  # each distinct (column, target) of a row once; its entries point at it
  keys = [None if e is None else np.unique(e[0].astype(np.int64) << 32 | e[1], return_inverse=True)
          for e in entries]
  width = _loss_width((len(k[0]) for k in keys if k is not None), least_widths[0])
  depth = _loss_width((len(e[0]) for e in entries if e is not None), least_widths[1])
  loss_columns = np.zeros((count, width), np.int32)
  targets = np.full((count, width), pad_id, np.int32)
  entry_index = np.zeros((count, depth), np.int32)
  loss_mask, advantages, rollout_logp = (np.zeros((count, depth), np.float32) for _ in range(3))
  sequence_ids = np.zeros((count, depth), np.int32)
  for r, (entry, key) in enumerate(zip(entries, keys)):
    if entry is None:
      continue
    (unique, inverse), n = key, len(entry[0])
    loss_columns[r, :len(unique)], targets[r, :len(unique)] = unique >> 32, unique & 0xFFFFFFFF
    entry_index[r, :n], loss_mask[r, :n] = inverse.reshape(-1), 1.0
    advantages[r, :n], rollout_logp[r, :n], sequence_ids[r, :n] = entry[2:]
  return PackedBatch(tokens, positions, ends, loss_columns, targets, entry_index, loss_mask,
                     advantages, rollout_logp, sequence_ids, num_tokens=int(loss_mask.sum()),
                     num_sequences=len(items), truncated=truncated,
                     sample_tokens=sum(len(it.inputs) for it in items),
                     packed_tokens=int((ends >= 0).sum()), pad_id=pad_id)
