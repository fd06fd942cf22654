"""Environments: tasks, the tools each offers, when an episode ends, its outcome score, and the
optional abilities (demonstrations, profiles, baselines, a gold policy) a run may use."""

from toolorch_jax.envs.base import Ability, Branches, Environment, Episode, Script
from toolorch_jax.envs.profiles import PreferenceDraw, ProfileConfig
from toolorch_jax.envs.registry import ENVIRONMENTS, EnvConfig, build_env, load_env

__all__ = ["Ability", "Branches", "ENVIRONMENTS", "EnvConfig", "Environment", "Episode",
           "PreferenceDraw", "ProfileConfig", "Script", "build_env", "load_env"]
