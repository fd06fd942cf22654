"""The built-in rewards, with ToolOrchestra's definitions."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from toolorch_jax.data.task import Preference
from toolorch_jax.rollout.trajectory import Trajectory
from toolorch_jax.rewards.base import register_reward


@register_reward("outcome")
def outcome(trajectory: Trajectory, group: Sequence[Trajectory]) -> float:
  """The environment's score of the episode."""
  return trajectory.outcome


@register_reward("efficiency")
def efficiency(trajectory: Trajectory, group: Sequence[Trajectory]) -> float:
  """ToolOrchestra's efficiency reward: if correct, max(0.2, 1 - 5 * cost - latency / 500)."""
  if trajectory.outcome < 1.0:
    return 0.0
  return max(0.2, 1.0 - 5.0 * trajectory.cost_usd - trajectory.latency_s / 500.0)


def preference_features(trajectory: Trajectory, tools: Sequence[str], tool_shares: bool = False) -> list[float]:
  """Per-tool call counts (or shares of the episode's calls), accuracy, -cost, -latency: larger is
  better for the last three."""
  counts = trajectory.tool_counts
  total = sum(counts.values()) if tool_shares else 1
  return [float(counts.get(tool, 0)) / max(total, 1) for tool in tools] + [
      trajectory.outcome, -trajectory.cost_usd, -trajectory.latency_s]


def _preference(trajectory: Trajectory, group: Sequence[Trajectory], tool_shares: bool) -> float:
  if trajectory.outcome < 1.0 or not trajectory.preference:
    return 0.0
  pref = trajectory.preference
  tools = sorted(pref.get("tools", {}))
  weights = np.array([pref["tools"][t] for t in tools] + [pref.get("accuracy", 0.0),
                                                          pref.get("cost", 0.0), pref.get("latency", 0.0)])
  features = np.array([preference_features(t, tools, tool_shares) for t in group])
  mine = np.array(preference_features(trajectory, tools, tool_shares))
  low, high = features.min(axis=0), features.max(axis=0)
  spread = high - low
  normalised = np.where(spread > 0, (mine - low) / np.where(spread > 0, spread, 1.0), 0.0)
  return float(np.dot(weights, normalised))


@register_reward("preference")
def preference(trajectory: Trajectory, group: Sequence[Trajectory]) -> float:
  """ToolOrchestra's preference reward, with cost and latency negated consistently.

  0 when the outcome is wrong; otherwise each feature is min-max normalised over the group
  (features equal across the group are skipped) and dotted with the task's preference vector.
  """
  return _preference(trajectory, group, tool_shares=False)


@register_reward("preference_share")
def preference_share(trajectory: Trajectory, group: Sequence[Trajectory]) -> float:
  """The preference reward with each preferred tool's share of the episode's calls in place of
  its count: calling a preferred tool again (paying twice) earns nothing, where counts reward it."""
  return _preference(trajectory, group, tool_shares=True)


@register_reward("utility")
def utility(trajectory: Trajectory, group: Sequence[Trajectory]) -> float:
  """The task's preference scored on its fixed scale (`Preference.utility`): accuracy minus cost
  and latency in the environment's units. Unlike `preference` it reads this episode alone, so an
  episode earns the same wherever it is played; with no preference it is the outcome."""
  if not trajectory.preference:
    return trajectory.outcome
  return Preference.from_dict(trajectory.preference).utility(
      trajectory.outcome, trajectory.cost_usd, trajectory.latency_s)
