"""QA tasks from jsonl in the data directory: FRAMES, GSM8K, or any file with a question and answer.

Each line is one record; the field names are configurable, and GSM8K's worked solutions are cut
to the final answer after `####`. Tasks are split into train and test by a hash of their id, so a
task stays in its split whatever the file order, the `limit` or the machine.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from toolorch_jax.config import ConfigError
from toolorch_jax.data.tasks import read_jsonl
from toolorch_jax.tools.base import data_file

SPLITS = ("train", "test", "all")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """Where a dataset's file is and how to read a record of it."""

  name: str  # ids without an id field are `<name>-<record index>`
  path: str  # in the data directory, or absolute
  id_field: str = "id"  # "" = by record index (GSM8K has no ids)
  question_field: str = "question"
  answer_field: str = "answer"
  answer_marker: str = ""  # gold = the text after the last marker, e.g. GSM8K's "####"


DATASETS = {
    "frames": DatasetSpec("frames", "frames/frames.jsonl"),
    "gsm8k": DatasetSpec("gsm8k", "gsm8k/test.jsonl", id_field="", answer_marker="####"),
}


@dataclasses.dataclass(frozen=True)
class QARecord:
  id: str
  question: str
  answer: str  # the gold final answer
  solution: str  # the answer field as written (GSM8K: the worked solution)


def dataset_spec(dataset: str) -> DatasetSpec:
  """A named dataset, or a jsonl path read with the default field names."""
  if dataset in DATASETS:
    return DATASETS[dataset]
  if not dataset.endswith(".jsonl"):
    raise ConfigError(f"env.settings.dataset: unknown dataset '{dataset}'; one of"
                      f" {sorted(DATASETS)}, or a .jsonl file")
  return DatasetSpec(Path(dataset).stem, dataset)


def _field(raw: dict[str, Any], field: str, where: str) -> str:
  value = raw.get(field)
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    value = str(value)
  if not isinstance(value, str) or not value.strip():
    got = "missing" if value is None else f"got {value!r}"[:80]
    raise ConfigError(f"{where}: field '{field}' must be a non-empty string ({got})")
  return value


def parse_record(raw: Any, spec: DatasetSpec, where: str, index: int) -> QARecord:
  """One line's record; `where` (file:line) names it in errors."""
  if not isinstance(raw, dict):
    raise ConfigError(f"{where}: expected a JSON object, got {type(raw).__name__}")
  record_id = _field(raw, spec.id_field, where) if spec.id_field else f"{spec.name}-{index}"
  solution = _field(raw, spec.answer_field, where)
  answer = solution.strip()
  if spec.answer_marker:
    _, marked, answer = solution.rpartition(spec.answer_marker)
    answer = answer.strip() if marked else ""
    if not answer:
      raise ConfigError(f"{where}: field '{spec.answer_field}' has no final answer after"
                        f" '{spec.answer_marker}'")
  return QARecord(record_id, _field(raw, spec.question_field, where).strip(), answer, solution)


def read_records(spec: DatasetSpec) -> list[QARecord]:
  """Every record of the file, in order; ConfigError naming the line and field of a bad one."""
  records, seen = [], {}
  for where, raw in read_jsonl(data_file(spec.path, "env.settings.dataset")):
    record = parse_record(raw, spec, where, len(records))
    if record.id in seen:
      raise ConfigError(f"{where}: duplicate id '{record.id}' (first at {seen[record.id]})")
    seen[record.id] = where
    records.append(record)
  if not records:
    raise ConfigError(f"{spec.path}: no records")
  return records
