"""τ²-bench domains: tasks, dbs and policies from the data directory, tools ours; solo episodes, τ²'s
reward, and replay of τ² results files."""

from toolorch_jax.envs.tau2.env import Tau2Environment, Tau2Episode
from toolorch_jax.envs.tau2.gold import gold_script, replay_script

__all__ = ["Tau2Environment", "Tau2Episode", "gold_script", "replay_script"]
