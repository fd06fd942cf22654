"""Preference profiles as configured in YAML, checked, and drawn one per task.

ToolOrchestra trains under many user preferences; an environment's `profiles` setting names them
(a weight per tool or model, and on accuracy, cost and latency) and how often each is drawn.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from toolorch_jax.config import ConfigError
from toolorch_jax.data.split import stable_unit
from toolorch_jax.data.task import Preference


@dataclasses.dataclass
class ProfileConfig:
  """A preference profile as configured in YAML (ToolOrchestra's preference vector, named)."""

  name: str = ""
  accuracy: float = 1.0
  cost: float = 0.0
  latency: float = 0.0
  tools: dict[str, float] = dataclasses.field(default_factory=dict)  # per tool or expert alias
  statement: str = ""  # the user's own words for it, stated in the prompt
  share: float = 1.0  # how often tasks get this profile, relative to the other profiles

  def preference(self) -> Preference:
    return Preference(tools=dict(self.tools), accuracy=self.accuracy, cost=self.cost,
                      latency=self.latency, name=self.name, statement=self.statement)


@dataclasses.dataclass(frozen=True)
class PreferenceDraw:
  """Checked preference profiles, one drawn per task id in proportion to its share: the same for
  every episode of the task's group and every rerun, and adding tasks does not reshuffle others."""

  preferences: tuple[Preference, ...]
  shares: tuple[float, ...]

  @classmethod
  def from_profiles(cls, profiles: Sequence[ProfileConfig], choices: set[str],
                    key: str) -> "PreferenceDraw":
    """Checks each profile (`key` names it in errors): weights >= 0, share > 0, and a tool weight
    must name a tool or model the policy can choose."""
    for i, profile in enumerate(profiles):
      where = f"{key}[{i}]"
      weights = {"accuracy": profile.accuracy, "cost": profile.cost, "latency": profile.latency}
      weights |= {f"tools.{name}": w for name, w in profile.tools.items()}
      for field, weight in weights.items():
        if weight < 0:
          raise ConfigError(f"{where}.{field}: weights must be >= 0, got {weight:g}")
      if not profile.share > 0:
        raise ConfigError(f"{where}.share must be positive, got {profile.share:g}")
      for name in profile.tools:
        if name not in choices:
          raise ConfigError(f"{where}.tools.{name}: not a tool or model the policy can choose"
                            f" (choices: {', '.join(sorted(choices))})")
    return cls(tuple(p.preference() for p in profiles), tuple(p.share for p in profiles))

  def in_units(self, cost_unit: float, latency_unit: float) -> "PreferenceDraw":
    """The same draw with every preference's utility on the environment's fixed scale."""
    return dataclasses.replace(self, preferences=tuple(
        dataclasses.replace(p, cost_unit=cost_unit, latency_unit=latency_unit) for p in self.preferences))

  def for_task(self, task_id: str) -> Preference | None:
    """The task's preference; None when no profile is configured."""
    if not self.preferences:
      return None
    point = stable_unit(f"preference:{task_id}") * sum(self.shares)
    for preference, share in zip(self.preferences, self.shares):
      if point < share:
        return preference
      point -= share
    return self.preferences[-1]
