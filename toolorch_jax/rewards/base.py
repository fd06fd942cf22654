"""Rewards read trajectories, never call tools: `reward(trajectory, group) -> float`.

A registry maps names to functions; a run's YAML picks components by name (or `module:attr` for
a user's own function) with weights, combined by sum or product. Each component is computed for a
whole group at once because some (the preference reward) normalise over the group.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from toolorch_jax.config import ConfigError
from toolorch_jax.registry import Registry
from toolorch_jax.rollout.trajectory import Trajectory

RewardFn = Callable[[Trajectory, Sequence[Trajectory]], float]
REWARDS: Registry[RewardFn] = Registry("reward", "a function (trajectory, group) -> float", callable)


def register_reward(name: str):
  """Decorator: `name` in a run's `rewards.components` means this function."""
  return REWARDS.register(name)


@dataclasses.dataclass
class RewardComponent:
  name: str = "outcome"
  weight: float = 1.0


@dataclasses.dataclass
class RewardConfig:
  components: list[RewardComponent] = dataclasses.field(default_factory=lambda: [RewardComponent()])
  combine: str = "sum"  # sum: sum of weight * component; product: product of component ** weight

  def __post_init__(self):
    if self.combine not in ("sum", "product"):
      raise ConfigError(f"rewards.combine must be 'sum' or 'product', got '{self.combine}'")
    if not self.components:
      raise ConfigError("rewards.components: give at least one component")


def compute_rewards(trajectories: Sequence[Trajectory], config: RewardConfig
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
  """(composite reward per trajectory, each component per trajectory), groups by `group_id`."""
  groups: dict[int, list[Trajectory]] = {}
  for t in trajectories:
    groups.setdefault(t.group_id, []).append(t)
  components = {}
  for component in config.components:
    fn = REWARDS.resolve(component.name, "rewards.components")
    components[component.name] = np.array([float(fn(t, groups[t.group_id])) for t in trajectories])
  if config.combine == "sum":
    total = sum(c.weight * components[c.name] for c in config.components)
  else:
    total = np.prod([components[c.name] ** c.weight for c in config.components], axis=0)
  return np.asarray(total, np.float64), components
