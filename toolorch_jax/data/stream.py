"""An endless, checkpointable stream of task batches for RL steps, built on grain.

Every epoch is a fresh permutation of the tasks (grain's index shuffle, seeded per epoch), cut
into batches of `batch_size` distinct tasks; the epoch's remainder is dropped so every step plays
the same number of tasks. The state is grain's iterator state plus what the stream was built
from, so a restore onto a different task list or batch size fails instead of silently drifting.

In a job of several processes, each process's stream is its shard: the same global batches, cut
into contiguous per-process shares (`offset` is where this share starts in the batch). Sharding the
batch rather than the task list keeps every step's global batch, its group ids and so its result
the same whatever the number of processes.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import grain

from toolorch_jax.config import ConfigError
from toolorch_jax.data.task import Task
from toolorch_jax.distributed import process_share


class TaskStream:
  """Iterator of `list[Task]` batches, epoch after epoch; `get_state`/`set_state` are JSON."""

  def __init__(self, tasks: Sequence[Task], batch_size: int, seed: int, shuffle: bool = True,
               shard: tuple[int, int] = (0, 1)):
    if not 1 <= batch_size <= len(tasks):
      raise ConfigError(f"task stream: batch_size {batch_size} must be between 1 and the number of"
                        f" tasks ({len(tasks)})")
    dataset = grain.MapDataset.source(tasks)
    if shuffle:
      dataset = dataset.shuffle(seed=seed)
    share = process_share(batch_size, *shard)
    dataset = dataset.batch(batch_size, drop_remainder=True, batch_fn=lambda rows: list(rows)[share])
    dataset = dataset.repeat()
    # Synchronous reads: tasks are already in memory, and prefetch threads would only race ahead.
    self._iterator = iter(dataset.to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=0)))
    ids = hashlib.sha256("\n".join(task.task_id for task in tasks).encode()).hexdigest()
    self._built_from = {"num_tasks": len(tasks), "task_ids_sha256": ids, "batch_size": batch_size,
                        "seed": seed, "shuffle": shuffle}
    if shard != (0, 1):
      self._built_from["shard"] = list(shard)
    self.batches_per_epoch = len(tasks) // batch_size
    self.offset = share.start

  def __iter__(self) -> "TaskStream":
    return self

  def __next__(self) -> list[Task]:
    return next(self._iterator)

  def get_state(self) -> dict[str, Any]:
    return {"iterator": self._iterator.get_state(), **self._built_from}

  def set_state(self, state: dict[str, Any]) -> None:
    """Continues exactly where the stream that produced `state` was."""
    for key, value in self._built_from.items():
      if state.get(key) != value:
        raise ConfigError(f"task stream state: '{key}' was {state.get(key)!r} when saved, is {value!r}"
                          " now (the tasks or the stream settings changed)")
    self._iterator.set_state(state["iterator"])
