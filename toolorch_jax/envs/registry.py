"""Environments by registered name or `module:attr`, configured from YAML (`configs/envs/`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from toolorch_jax.config import ConfigError, config_dir, from_mapping, load_config
from toolorch_jax.envs.base import Environment
from toolorch_jax.registry import Registry

ENVIRONMENTS: Registry[type[Environment]] = Registry(
    "environment", "an Environment subclass",
    lambda obj: isinstance(obj, type) and issubclass(obj, Environment))
ENVIRONMENTS.register("routing", "toolorch_jax.envs.routing:RoutingEnvironment")
ENVIRONMENTS.register("tau2", "toolorch_jax.envs.tau2.env:Tau2Environment")
ENVIRONMENTS.register("qa", "toolorch_jax.envs.qa.env:QAEnvironment")


@dataclasses.dataclass
class EnvConfig:
  """`name` (registered) or `module:attr`, and that environment's own `settings`."""

  name: str = ""
  settings: dict[str, Any] = dataclasses.field(default_factory=dict)


def build_env(config: EnvConfig) -> Environment:
  """The environment, its settings checked against its `Settings` dataclass (errors name the key)."""
  cls = ENVIRONMENTS.resolve(config.name, "env.name")
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
