"""Typed configs: OmegaConf structured schemas loaded from YAML with `key.sub=value` overrides.

Every config in the project is a dataclass schema. YAML files and command-line overrides are merged
onto it, so an unknown key or a value of the wrong type fails at load time with a message naming the
key (and the file), instead of surfacing as an AttributeError deep inside a training run.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from pathlib import Path
from typing import Any, Sequence, TypeVar

from etils import epath
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

T = TypeVar("T")

CONFIG_DIR_ENV = "TOOLORCH_CONFIG_DIR"


class ConfigError(ValueError):
  """A config could not be loaded; the message names the key, value and source."""


def config_dir() -> Path:
  """The project's `configs/` folder (override with $TOOLORCH_CONFIG_DIR)."""
  if env := os.environ.get(CONFIG_DIR_ENV):
    return Path(env)
  return Path(__file__).resolve().parent.parent / "configs"


def _describe(err: OmegaConfBaseException, source: str) -> str:
  key = getattr(err, "full_key", None) or getattr(err, "key", None)
  # OmegaConf appends a multi-line "full_key: ... object_type=..." trailer; keep the first line.
  reason = str(err).split("\n")[0].strip()
  if isinstance(err, ConfigKeyError):
    return f"{source}: unknown key '{key}' ({reason})"
  if isinstance(err, ValidationError):
    return f"{source}: bad value for key '{key}': {reason}"
  return f"{source}: {reason} (key '{key}')"


def _merge(base: Any, update: Any, source: str) -> Any:
  try:
    return OmegaConf.merge(base, update)
  except OmegaConfBaseException as err:
    raise ConfigError(_describe(err, source)) from None
  except TypeError:  # a list where a mapping belongs (or the reverse): find and name the key
    raise ConfigError(f"{source}: {_shape_mismatch(base, update)}") from None


def _shape_mismatch(base: Any, update: Any, prefix: str = "") -> str:
  """Names the first key whose value is a list where the schema has a mapping, or the reverse."""
  if OmegaConf.is_dict(base) and OmegaConf.is_dict(update):
    for key in update:
      if key in base:
        found = _shape_mismatch(base[key], update[key], f"{prefix}{key}.")
        if found:
          return found
    return ""
  expected = "a mapping" if OmegaConf.is_dict(base) else "a list"
  where = f"key '{prefix[:-1]}'" if prefix else "the top level"
  return f"{where} must be {expected}" if OmegaConf.is_config(update) else ""


def read_yaml(path: str | os.PathLike) -> Any:
  """Loads one YAML file (local or gs://) into an OmegaConf node; clear errors if missing or broken."""
  path = epath.Path(path)
  if not path.is_file():
    raise ConfigError(f"config file not found: {path}")
  try:
    return OmegaConf.create(path.read_text())
  except Exception as err:  # yaml.YAMLError and friends: report the file, keep the parser's message.
    raise ConfigError(f"{path}: not valid YAML: {err}") from None


def load_config(
    schema: type[T],
    path: str | os.PathLike | None = None,
    overrides: Sequence[str] = (),
) -> T:
  """Builds a `schema` instance from defaults, an optional YAML file and `a.b=value` overrides."""
  node = OmegaConf.structured(schema)
  if path is not None:
    node = _merge(node, read_yaml(path), str(path))
  for item in overrides:
    if "=" not in item:
      raise ConfigError(f"override '{item}' is not of the form key.sub=value")
    try:
      update = OmegaConf.from_dotlist([item])
    except OmegaConfBaseException as err:
      raise ConfigError(f"override '{item}': {err}") from None
    node = _merge(node, update, f"override '{item}'")
  try:
    return OmegaConf.to_object(node)
  except OmegaConfBaseException as err:
    raise ConfigError(_describe(err, str(path or "config"))) from None


def from_mapping(schema: type[T], data: Any, source: str) -> T:
  """A `schema` instance from a plain mapping (e.g. a `settings:` block), with the same errors."""
  node = _merge(OmegaConf.structured(schema), OmegaConf.create(data or {}), source)
  try:
    return OmegaConf.to_object(node)
  except OmegaConfBaseException as err:
    raise ConfigError(_describe(err, source)) from None


def load_object(target: str, key: str) -> Any:
  """The object a `module:attr` string names (a user's tool, reward or environment); the error
  names the config key it came from."""
  module_name, sep, attr = target.partition(":")
  if not sep or not module_name or not attr:
    raise ConfigError(f"{key}: '{target}' is not of the form module:attr")
  try:
    module = importlib.import_module(module_name)
  except ImportError as err:
    raise ConfigError(f"{key}: cannot import module '{module_name}': {err}") from None
  if not hasattr(module, attr):
    raise ConfigError(f"{key}: module '{module_name}' has no attribute '{attr}'")
  return getattr(module, attr)


def to_yaml(config: Any) -> str:
  """The YAML text of a config dataclass, as written beside checkpoints and runs."""
  assert dataclasses.is_dataclass(config)
  return OmegaConf.to_yaml(OmegaConf.structured(config))
