"""Rewards over trajectories: outcome, efficiency, preference, composites, and a registry."""

from toolorch_jax.rewards import functions  # noqa: F401  (registers the built-in rewards)
from toolorch_jax.rewards.base import (RewardComponent, RewardConfig, compute_rewards, register_reward,
                                       resolve_reward)

__all__ = ["RewardComponent", "RewardConfig", "compute_rewards", "register_reward", "resolve_reward"]
