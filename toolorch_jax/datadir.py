"""Where the public data lives: $TOOLORCH_DATA_DIR, else `../shared/data` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

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
