"""Where the public data lives: $TOOLORCH_DATA_DIR, else `../shared/data` beside the checkout.

Every file the project reads from the data directory is looked up here, so a missing file is
reported the same way everywhere: the file, the directory, and the config key that named it.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolorch_jax.config import ConfigError

DATA_DIR_ENV = "TOOLORCH_DATA_DIR"


def data_dir() -> Path:
  if env := os.environ.get(DATA_DIR_ENV):
    return Path(env)
  beside_checkout = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
  if beside_checkout.is_dir():
    return beside_checkout
  raise FileNotFoundError(
      f"no data directory: set ${DATA_DIR_ENV} to a folder holding the project's data files")


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
