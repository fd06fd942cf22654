"""Splits and per-task draws fixed by a task's id alone: the same in every process and on every
machine, and adding tasks never reshuffles the others."""

from __future__ import annotations

import hashlib


def stable_unit(key: str) -> float:
  """A number in [0, 1) fixed by `key`."""
  return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2 ** 64


def in_split(task_id: str, split: str, test_fraction: float) -> bool:
  """Whether a task belongs to `split` (train, test or all), held out by a hash of its id."""
  if split == "all":
    return True
  return (stable_unit(f"split:{task_id}") < test_fraction) == (split == "test")
