"""Tasks from jsonl files: one JSON object per line, the prompt, answer and id fields named by the
caller; every other field goes into `Task.metadata`. Errors name the file, line and field."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from etils import epath

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.base import Task


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
  """(`file:line`, object) for each non-blank line (local or gs://)."""
  path = epath.Path(path)
  if not path.is_file():
    raise ConfigError(f"task file not found: {path}")
  with path.open("r") as lines:
    for number, line in enumerate(lines, 1):
      if not line.strip():
        continue
      where = f"{path}:{number}"
      try:
        raw = json.loads(line)
      except json.JSONDecodeError as err:
        raise ConfigError(f"{where}: not valid JSON: {err}") from None
      if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(raw).__name__}")
      yield where, raw


def _text(raw: dict[str, Any], field: str, where: str, numbers_ok: bool = False) -> str:
  value = raw.get(field)
  if numbers_ok and isinstance(value, int) and not isinstance(value, bool):
    value = str(value)
  if not isinstance(value, str) or not value.strip():
    got = "missing" if value is None else f"got {value!r}"[:80]
    raise ConfigError(f"{where}: field '{field}' must be a non-empty string ({got})")
  return value


def read_task_file(path: str | os.PathLike, prompt_field: str, answer_field: str,
                   id_field: str | None = None) -> list[Task]:
  """Every task of a jsonl file, in order. Without `id_field`, ids are `<file stem>-<index>`."""
  tasks, seen = [], {}
  for where, raw in read_jsonl(path):
    if answer_field not in raw:
      raise ConfigError(f"{where}: missing field '{answer_field}'")
    task_id = (_text(raw, id_field, where, numbers_ok=True) if id_field
               else f"{epath.Path(path).stem}-{len(tasks)}")
    if task_id in seen:
      raise ConfigError(f"{where}: duplicate id '{task_id}' (first at {seen[task_id]})")
    seen[task_id] = where
    metadata = {k: v for k, v in raw.items() if k not in (prompt_field, answer_field, id_field)}
    tasks.append(Task(task_id, _text(raw, prompt_field, where), raw[answer_field], metadata))
  if not tasks:
    raise ConfigError(f"{path}: no tasks")
  return tasks
