"""What a run's report checks after RL, declared in the run's YAML (`report.targets`).

A target compares one figure of the evaluation after RL with a reference, e.g. for the embedded
default run: the mean reward rose; the "cost first" profile spends at most 0.6 times what
"accuracy first" spends; each profile is more accurate than random mixing of the environment's
experts at the same cost.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from toolorch_jax.config import ConfigError

RELATIONS = ("above", "at_most")
EACH_PROFILE = "*"


@dataclasses.dataclass
class TargetConfig:
  """`metric` (a key of a profile's evaluation: utility, mean_reward, accuracy, mean_cost_usd,
  mean_latency_s) after RL for `profile` ("" = the mean over profiles, "*" = each profile, one
  target apiece named `name/profile`) must be `relation` (`above` or `at_most`) `factor` times the
  same metric of `against`, plus `margin`:

    before          the same profile (or mean) before RL
    profile:NAME    profile NAME after RL
    baseline:NAME   the environment's baseline NAME (its point for the profile, when it has one
                    per profile)
  """

  name: str = ""
  metric: str = "mean_reward"
  profile: str = ""
  against: str = "before"
  relation: str = "above"
  factor: float = 1.0
  margin: float = 0.0  # added to the bound: accuracy 0.03 above a baseline is factor 1, margin 0.03

  def __post_init__(self):
    if not self.name:
      raise ConfigError("report.targets: every target needs a name")
    if self.relation not in RELATIONS:
      raise ConfigError(f"report.targets '{self.name}': relation must be one of {RELATIONS},"
                        f" got '{self.relation}'")
    kind, _, what = self.against.partition(":")
    if not (self.against == "before" or (kind in ("profile", "baseline") and what)):
      raise ConfigError(f"report.targets '{self.name}': against must be before, profile:NAME or"
                        f" baseline:NAME, got '{self.against}'")

  @property
  def baseline(self) -> str | None:
    kind, _, name = self.against.partition(":")
    return name if kind == "baseline" else None

  def profiles_named(self) -> list[str]:
    """The profiles this target names (to check they exist before the run)."""
    kind, _, name = self.against.partition(":")
    named = [self.profile] if self.profile not in ("", EACH_PROFILE) else []
    return named + ([name] if kind == "profile" else [])


def _metric(stage: dict[str, dict], profile: str, metric: str) -> float:
  if profile:
    return float(stage[profile][metric])
  return float(np.mean([summary[metric] for summary in stage.values()]))


def _reference(target: TargetConfig, profile: str, before: dict, after: dict,
               baselines: dict[str, Any]) -> float:
  kind, _, name = target.against.partition(":")
  if kind == "before":
    return _metric(before, profile, target.metric)
  if kind == "profile":
    return _metric(after, name, target.metric)
  point = baselines[name]
  value = point[profile][target.metric] if profile in point else point[target.metric]
  return float(value[profile] if isinstance(value, dict) else value)  # a utility per profile


def check_targets(targets: Sequence[TargetConfig], before: dict[str, dict], after: dict[str, dict],
                  baselines: dict[str, Any]) -> dict[str, bool]:
  """`{name: met}` for every target; `before`/`after` map a profile to its evaluation."""
  met = {}
  for target in targets:
    each = target.profile == EACH_PROFILE
    for profile in (list(after) if each else [target.profile]):
      value = _metric(after, profile, target.metric)
      bound = target.factor * _reference(target, profile, before, after, baselines) + target.margin
      name = f"{target.name}/{profile}" if each else target.name
      met[name] = bool(value > bound if target.relation == "above" else value <= bound)
  return met
