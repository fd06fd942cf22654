"""Environments: tasks, the tools each offers, when an episode ends, and its outcome score."""

from toolorch_jax.envs.base import EnvEpisode, Environment, Preference, Task
from toolorch_jax.envs.registry import EnvConfig, build_env, load_env, register_env

__all__ = ["EnvConfig", "EnvEpisode", "Environment", "Preference", "Task", "build_env", "load_env",
           "register_env"]

register_env("routing", "toolorch_jax.envs.routing:RoutingEnvironment")
register_env("tau2", "toolorch_jax.envs.tau2.env:Tau2Environment")
register_env("qa", "toolorch_jax.envs.qa.env:QAEnvironment")
