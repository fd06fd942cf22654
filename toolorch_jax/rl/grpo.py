"""GRPO: group-relative advantages and their filters (host side, numpy).

Advantage = (r - group mean) / (sample std with n-1 + eps), clipped to [-clip, clip]; a group
whose std is at most `min_std` teaches nothing and is dropped (as ToolOrchestra does). With
`scale_by_std: false` the advantage is r - group mean, unscaled (Dr. GRPO; verl's
`norm_adv_by_std_in_grpo: false`): dividing by the std weighs a group whose rewards differ a
little (say, only by price) as much as one whose answers differ in being right.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Sequence

import numpy as np

from toolorch_jax.config import ConfigError
from toolorch_jax.rl.loss import KL_ESTIMATORS
from toolorch_jax.rollout.trajectory import EpisodeEnd, Trajectory


@dataclasses.dataclass
class GRPOConfig:
  std_ddof: int = 1
  scale_by_std: bool = True  # False: advantages are r - group mean (Dr. GRPO)
  clip: float | None = 3.0  # None: no clipping
  min_std: float | None = 0.1  # None: keep every group
  eps: float = 1e-6
  drop_invalid: bool = True  # drop episodes with no valid answer or no valid tool call
  success_bonus: float = 0.0  # added to the advantage of samples whose reward >= 1 (ToolOrchestra: 0.1)
  clip_low: float = 0.2
  clip_high: float = 0.28
  dual_clip: float | None = 10.0
  kl_coef: float = 0.0  # 0: no reference model is kept (ToolOrchestra: 1e-4)
  kl_estimator: str = "mse"  # mse | k1 | low_var_kl (ToolOrchestra: mse)
  entropy_coef: float = 0.0  # bonus on token entropy (ToolOrchestra: 0); > 0 resists collapse
  aggregation: str = "token_mean"  # token_mean | sequence_mean
  tis_cap: float | None = None  # truncated importance sampling with rollout log-probs, if set
  # >0: rollouts run this many steps ahead of the update, played by weights this many versions
  # behind (see rl.trainer); older episodes are filtered out. 0: synchronous and on-policy.
  max_staleness: int = 0

  def __post_init__(self):
    if self.max_staleness < 0:
      raise ConfigError(f"grpo.max_staleness must be >= 0, got {self.max_staleness}")
    if self.kl_estimator not in KL_ESTIMATORS:
      raise ConfigError(f"grpo.kl_estimator: '{self.kl_estimator}' is not one of {KL_ESTIMATORS}")
    if not 0 <= self.clip_low < 1 or self.clip_high < 0:
      raise ConfigError(f"grpo.clip_low/clip_high: need 0 <= clip_low < 1 and clip_high >= 0,"
                        f" got {self.clip_low}/{self.clip_high}")
    if self.dual_clip is not None and self.dual_clip <= 1:
      raise ConfigError(f"grpo.dual_clip: dual-clip PPO needs c > 1 (or null for none),"
                        f" got {self.dual_clip}")
    if self.max_staleness > 0 and self.tis_cap is None:
      # Measured on the embedded run at staleness 1: it diverged without the correction; with
      # 2.0 it held at 16-row micro-batches and broke at step ~105 at 2-row ones.
      warnings.warn(f"grpo.max_staleness={self.max_staleness} without grpo.tis_cap: episodes played"
                    " by older weights are not corrected for (set e.g. grpo.tis_cap=2.0)",
                    stacklevel=3)


def group_advantages(rewards, group_ids, std_ddof: int = 1, clip: float | None = 3.0,
                     min_std: float | None = 0.1, eps: float = 1e-6,
                     scale_by_std: bool = True) -> tuple[np.ndarray, np.ndarray]:
  """(advantages [N], keep [N]); keep is False for every member of a dropped group."""
  rewards = np.asarray(rewards, np.float64)
  group_ids = np.asarray(group_ids)
  advantages = np.zeros_like(rewards)
  keep = np.ones(rewards.shape, bool)
  for group in np.unique(group_ids):
    members = group_ids == group
    values = rewards[members]
    if values.size <= std_ddof or np.ptp(values) == 0:  # nothing to compare: exactly 0
      std = 0.0
      advantages[members] = 0.0
    else:
      std = float(np.std(values, ddof=std_ddof))
      advantages[members] = (values - values.mean()) / (std + eps if scale_by_std else 1.0)
    if min_std is not None and std <= min_std:
      keep[members] = False
  if clip is not None:
    advantages = np.clip(advantages, -clip, clip)
  return advantages, keep


def valid_episode(trajectory: Trajectory) -> bool:
  """Ended by the environment (a valid answer) after at least one tool call that worked."""
  return trajectory.finish == EpisodeEnd.ENV and any(c.error is None for c in trajectory.calls)


def weigh_and_filter(trajectories: Sequence[Trajectory], rewards: np.ndarray, config: GRPOConfig,
                     trainer_version: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
  """(advantages, keep mask, filter counts) for a batch of groups: group advantages, then the
  filters (low-std groups, invalid episodes if asked, episodes staler than allowed)."""
  advantages, keep = group_advantages(rewards, [t.group_id for t in trajectories], config.std_ddof,
                                      config.clip, config.min_std, config.eps, config.scale_by_std)
  counts = {"filtered/low_std": float((~keep).sum())}
  if config.drop_invalid:
    valid = np.array([valid_episode(t) for t in trajectories])
    counts["filtered/invalid"] = float((keep & ~valid).sum())
    keep &= valid
  stale = np.array([bool(t.policy_versions) and min(t.policy_versions) < trainer_version - config.max_staleness
                    for t in trajectories])
  counts["filtered/stale"] = float((keep & stale).sum())
  keep &= ~stale
  if config.success_bonus:
    advantages = advantages + config.success_bonus * (rewards >= 1.0)
  return advantages, keep, counts
