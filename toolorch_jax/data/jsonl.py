"""The one JSONL reader: task files, demonstrations, corpora and search passages all go through it,
so every bad line is reported the same way, as `file:line` and what is wrong with it."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from etils import epath

from toolorch_jax.config import ConfigError


def _lines(path: epath.Path, key: str) -> Iterator[tuple[int, str]]:
  """(line number, line) for each non-blank line; `key` names whatever gave a missing path."""
  if not path.is_file():
    raise ConfigError(f"{key}: file not found: {path}")
  with path.open("r") as lines:
    yield from ((number, line) for number, line in enumerate(lines, 1) if line.strip())


def read_jsonl(path: str | os.PathLike, key: str = "file") -> Iterator[tuple[str, dict[str, Any]]]:
  """(`file:line`, object) for each non-blank line of a local or gs:// file; `key` names the
  config key or flag that gave the path when the file is missing."""
  path = epath.Path(path)
  for number, line in _lines(path, key):
    where = f"{path}:{number}"
    try:
      raw = json.loads(line)
    except json.JSONDecodeError as err:
      raise ConfigError(f"{where}: not valid JSON: {err}") from None
    if not isinstance(raw, dict):
      raise ConfigError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    yield where, raw


def read_texts(path: str | os.PathLike, field: str, key: str = "file") -> Iterator[str]:
  """The `field` of each record of a .jsonl file, or the lines of any other text file."""
  path = epath.Path(path)
  if path.suffix != ".jsonl":
    yield from (line.rstrip("\n") for _, line in _lines(path, key))
    return
  for where, record in read_jsonl(path, key):
    if not isinstance(record.get(field), str):
      raise ConfigError(f"{where}: no string field '{field}'")
    yield record[field]
