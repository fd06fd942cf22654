"""The QA datasets in the data directory by name (FRAMES, GSM8K), or any jsonl of questions.

Tasks are split into train and test by a hash of their id (`data.split.in_split`), so a task
stays in its split whatever the file order, the `limit` or the machine.
"""

from __future__ import annotations

from pathlib import Path

from toolorch_jax.config import ConfigError
from toolorch_jax.data.task_file import TaskFile

SPLITS = ("train", "test", "all")
DATASETS = {
    "frames": TaskFile("frames/frames.jsonl", name="frames"),
    "gsm8k": TaskFile("gsm8k/test.jsonl", name="gsm8k", id_field="", answer_marker="####"),
}


def dataset_file(dataset: str) -> TaskFile:
  """A named dataset, or a jsonl path read with the default field names."""
  if dataset in DATASETS:
    return DATASETS[dataset]
  if not dataset.endswith(".jsonl"):
    raise ConfigError(f"env.settings.dataset: unknown dataset '{dataset}'; one of"
                      f" {sorted(DATASETS)}, or a .jsonl file")
  return TaskFile(dataset, name=Path(dataset).stem)
