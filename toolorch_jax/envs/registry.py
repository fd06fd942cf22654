"""Environments by registered name or `module:attr`, configured from YAML (`configs/envs/`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from toolorch_jax.config import ConfigError, config_dir, from_mapping, load_config, load_object
from toolorch_jax.envs.base import Environment

_REGISTRY: dict[str, str] = {}  # name -> "module:attr", imported on first use


def register_env(name: str, target: str) -> None:
  _REGISTRY[name] = target


@dataclasses.dataclass
class EnvConfig:
  """`name` (registered) or `module:attr`, and that environment's own `settings`."""

  name: str = ""
  settings: dict[str, Any] = dataclasses.field(default_factory=dict)


def resolve_env(name: str) -> type[Environment]:
  target = _REGISTRY.get(name, name)
  if ":" not in target:
    raise ConfigError(f"env.name: unknown environment '{name}'; registered: {sorted(_REGISTRY)},"
                      " or give module:attr")
  cls = load_object(target, "env.name")
  if not (isinstance(cls, type) and issubclass(cls, Environment)):
    raise ConfigError(f"env.name: '{target}' is not an Environment subclass")
  return cls


def build_env(config: EnvConfig) -> Environment:
  """The environment, its settings checked against its `Settings` dataclass (errors name the key)."""
  cls = resolve_env(config.name)
  schema = getattr(cls, "Settings", None)
  if schema is None:
    if config.settings:
      raise ConfigError(f"env.settings: environment '{config.name}' takes no settings")
    return cls()
  return cls(from_mapping(schema, config.settings, f"env.settings of '{config.name}'"))


def load_env(name_or_path: str, overrides: list[str] | tuple[str, ...] = ()) -> Environment:
  """A YAML file (or a preset name in configs/envs/) holding an EnvConfig."""
  path = config_dir() / "envs" / f"{name_or_path}.yaml"
  config = load_config(EnvConfig, path if path.is_file() else name_or_path, overrides)
  return build_env(config)
