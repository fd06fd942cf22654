"""Rewards read trajectories, never call tools: `reward(trajectory, group) -> float`.

A registry maps names to functions; a run's YAML picks components by name (or `module:attr` for
a user's own function) with weights, combined by sum or product. Each component is computed for a
whole group at once because some (the preference reward) normalise over the group.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from toolorch_jax.agent.trajectory import Trajectory
from toolorch_jax.config import ConfigError, load_object

RewardFn = Callable[[Trajectory, Sequence[Trajectory]], float]
_REGISTRY: dict[str, RewardFn] = {}


def register_reward(name: str):
  def decorate(fn: RewardFn) -> RewardFn:
    _REGISTRY[name] = fn
    return fn
  return decorate


def resolve_reward(name: str) -> RewardFn:
  if name in _REGISTRY:
    return _REGISTRY[name]
  if ":" not in name:
    raise ConfigError(f"rewards.components: unknown reward '{name}'; registered: {sorted(_REGISTRY)},"
                      " or give module:attr")
  fn = load_object(name, "rewards.components")
  if not callable(fn):
    raise ConfigError(f"rewards.components: '{name}' is not callable")
  return fn


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
    fn = resolve_reward(component.name)
    components[component.name] = np.array([float(fn(t, groups[t.group_id])) for t in trajectories])
  if config.combine == "sum":
    total = sum(c.weight * components[c.name] for c in config.components)
  else:
    total = np.prod([components[c.name] ** c.weight for c in config.components], axis=0)
  return np.asarray(total, np.float64), components
