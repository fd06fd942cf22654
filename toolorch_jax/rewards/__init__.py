"""Rewards over trajectories: outcome, efficiency, preference, composites, and a registry."""

from toolorch_jax.rewards import functions  # noqa: F401  (registers the built-in rewards)
from toolorch_jax.rewards.base import REWARDS, RewardComponent, RewardConfig, compute_rewards, register_reward

__all__ = ["REWARDS", "RewardComponent", "RewardConfig", "compute_rewards", "register_reward"]
