"""Tasks from a JSONL file: one record per line, its id, question and answer fields named by a
`TaskFile`; every other field goes into `Task.metadata`. Errors name the file, line and field.

GSM8K-style answers hold a worked solution: with `answer_marker` the gold is the text after the
last marker, and the whole solution is kept as `metadata["solution"]`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from toolorch_jax.config import ConfigError
from toolorch_jax.data.jsonl import read_jsonl
from toolorch_jax.data.task import Task
from toolorch_jax.datadir import data_file


@dataclasses.dataclass(frozen=True)
class TaskFile:
  """Where a task file is and how to read one of its records."""

  path: str  # in the data directory, or absolute
  name: str = ""  # ids without an id field are `<name>-<record index>`; "" = the file's stem
  id_field: str = "id"  # "" = by record index
  question_field: str = "question"
  answer_field: str = "answer"
  answer_marker: str = ""  # gold = the text after the last marker, e.g. GSM8K's "####"


def _text(raw: dict[str, Any], field: str, where: str) -> str:
  value = raw.get(field)
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    value = str(value)
  if not isinstance(value, str) or not value.strip():
    got = "missing" if value is None else f"got {value!r}"[:80]
    raise ConfigError(f"{where}: field '{field}' must be a non-empty string ({got})")
  return value


def _task(raw: dict[str, Any], spec: TaskFile, where: str, index: int) -> Task:
  name = spec.name or Path(spec.path).stem
  task_id = _text(raw, spec.id_field, where) if spec.id_field else f"{name}-{index}"
  solution = _text(raw, spec.answer_field, where)
  metadata = {k: v for k, v in raw.items()
              if k not in (spec.id_field, spec.question_field, spec.answer_field)}
  answer = solution.strip()
  if spec.answer_marker:
    _, marked, answer = solution.rpartition(spec.answer_marker)
    answer = answer.strip() if marked else ""
    if not answer:
      raise ConfigError(f"{where}: field '{spec.answer_field}' has no final answer after"
                        f" '{spec.answer_marker}'")
    metadata["solution"] = solution
  return Task(task_id, _text(raw, spec.question_field, where).strip(), answer, metadata)


def read_task_file(spec: TaskFile, key: str) -> list[Task]:
  """Every task of the file, in order; `key` is the config key that named the file."""
  tasks, seen = [], {}
  for where, raw in read_jsonl(data_file(spec.path, key), key):
    task = _task(raw, spec, where, len(tasks))
    if task.task_id in seen:
      raise ConfigError(f"{where}: duplicate id '{task.task_id}' (first at {seen[task.task_id]})")
    seen[task.task_id] = where
    tasks.append(task)
  if not tasks:
    raise ConfigError(f"{key}: {spec.path} holds no tasks")
  return tasks
