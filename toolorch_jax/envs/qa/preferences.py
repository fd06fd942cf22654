"""User preference profiles (ToolOrchestra's): configured as a list, one drawn per task.

The profile schema is `envs.base.ProfileConfig`. The draw is a hash of the task
id, so every episode of a task (a GRPO group) and every rerun gets the same preference, and adding
tasks does not reshuffle the others.
"""

from __future__ import annotations

from typing import Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.base import Preference, ProfileConfig


def build_preferences(profiles: Sequence[ProfileConfig], choices: set[str]) -> list[Preference]:
  """Checked profiles; a tool weight must name a tool or model the policy can choose."""
  preferences = []
  for i, profile in enumerate(profiles):
    key = f"env.settings.preferences[{i}]"
    weights = {"accuracy": profile.accuracy, "cost": profile.cost, "latency": profile.latency}
    weights |= {f"tools.{name}": w for name, w in profile.tools.items()}
    for field, weight in weights.items():
      if weight < 0:
        raise ConfigError(f"{key}.{field}: weights must be >= 0, got {weight:g}")
    for name in profile.tools:
      if name not in choices:
        raise ConfigError(f"{key}.tools.{name}: not a tool or model of this surface"
                          f" (choices: {', '.join(sorted(choices))})")
    preferences.append(profile.preference())
  return preferences

