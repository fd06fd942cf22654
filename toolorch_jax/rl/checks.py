"""What a run asks of its environment, checked at config load before any stage spends time: a
ConfigError names the key that asked (`warmstart.demonstrations`, `report.targets[2].against`, ...)
and what the environment lacks."""

from __future__ import annotations

from toolorch_jax.config import ConfigError
from toolorch_jax.data.task import Task
from toolorch_jax.envs.base import Ability, Environment
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.report import profile_names


def tasks_of(env: Environment, split: str, key: str) -> list[Task]:
  """The tasks of `split`; ConfigError naming `key` for an unknown or empty split."""
  try:
    found = list(env.tasks(split))
  except ConfigError as err:
    raise ConfigError(f"{key}: {err}") from None
  if not found:
    raise ConfigError(f"{key}: environment '{env.name}' has no tasks in '{split}'")
  return found


def check_run(config: RunConfig, env: Environment) -> None:
  """ConfigError naming the key when the config asks for something the environment lacks."""
  tasks_of(env, config.rollout.split, "rollout.split")
  if config.warmstart.demonstrations and not config.model.init_from:
    env.require(Ability.DEMONSTRATIONS, "warmstart.demonstrations")
    if config.warmstart.selection == "reward":
      env.require(Ability.DEMONSTRATION_BRANCHES, "warmstart.selection")
  if not config.report.enabled:
    return
  tasks_of(env, config.report.split, "report.split")
  profiles = set(profile_names(env))
  for i, target in enumerate(config.report.targets):
    if target.baseline:
      env.require(Ability.BASELINES, f"report.targets[{i}].against")
    for name in target.profiles_named():
      if name not in profiles:
        raise ConfigError(f"report.targets[{i}]: no profile '{name}' in environment"
                          f" '{config.env.name}' (profiles: {', '.join(sorted(profiles))})")
