"""τ²-bench domains in solo mode: tasks, db and policy from the data directory, tools our own."""

from toolorch_jax.envs.tau2.env import Tau2Environment, Tau2Episode
from toolorch_jax.envs.tau2.gold import gold_script, replay_script

__all__ = ["Tau2Environment", "Tau2Episode", "gold_script", "replay_script"]
