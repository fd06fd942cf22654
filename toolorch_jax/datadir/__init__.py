"""Where the public data lives: $TOOLORCH_DATA_DIR (a folder, or gs://... on pods), else
`../shared/data` beside the checkout, else what `toolorch data download` fetched into the user's
cache (`default_download_dir()`).

Every file the project reads from the data directory is looked up here, so a missing file is
reported the same way everywhere: the file, the directory, and the config key that named it.
A gs:// directory is read through a local copy verified against the manifest's sha256.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Callable

from toolorch_jax.config import ConfigError
from toolorch_jax.datadir.manifest import SUMS_FILE

DATA_DIR_ENV = "TOOLORCH_DATA_DIR"


def _cache_root() -> Path:
  return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolorch_jax"


def default_download_dir() -> Path:
  """Where `toolorch data download` puts the files when not told (found here afterwards)."""
  return _cache_root() / "data"


def _beside_checkout() -> Path:
  return Path(__file__).resolve().parent.parent.parent.parent / "shared" / "data"


@functools.cache
def _local_copy(remote: str) -> Path:
  from toolorch_jax.datadir.download import mirror

  key = hashlib.sha256(remote.rstrip("/").encode()).hexdigest()[:16]
  return mirror(remote, _cache_root() / "remote" / key)


def data_dir() -> Path:
  if env := os.environ.get(DATA_DIR_ENV):
    return _local_copy(env) if env.startswith("gs://") else Path(env)
  if _beside_checkout().is_dir():
    return _beside_checkout()
  if (default_download_dir() / SUMS_FILE).is_file():
    return default_download_dir()
  raise FileNotFoundError(
      f"no data directory: run `toolorch data download` (into {default_download_dir()}), or set"
      f" ${DATA_DIR_ENV} to a folder or gs:// path holding the project's data files")


def ensure_data_dir(log: Callable[[str], None] = print) -> Path:
  """The data directory; when there is none, download the public files first (one-line notice)."""
  try:
    return data_dir()
  except FileNotFoundError:
    if os.environ.get(DATA_DIR_ENV):
      raise
  from toolorch_jax.datadir.download import download

  target = default_download_dir()
  log(f"toolorch: no data directory found; downloading the public data files into {target}"
      " (toolorch data download)")
  download(target, log=lambda line: None)
  return target


def data_path(relative: str) -> Path:
  """A file of the data directory, with an error naming it and the directory when missing."""
  path = data_dir() / relative
  if not path.exists():
    raise FileNotFoundError(f"data file '{relative}' not found in {data_dir()} (${DATA_DIR_ENV})")
  return path


def data_file(path: str, key: str) -> Path:
  """A file a config names: absolute, or relative to the data directory; ConfigError naming `key`."""
  if os.path.isabs(path):
    if not os.path.isfile(path):
      raise ConfigError(f"{key}: file not found: {path}")
    return Path(path)
  try:
    return data_path(path)
  except FileNotFoundError as err:
    raise ConfigError(f"{key}: {err}") from None
