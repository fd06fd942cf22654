"""The rollout layer: the asynchronous episode loop, policies, the trajectory record and its
summary. `rollout.engine_rollout.Rollout` (the `serve` extra) plays them on the in-process engine."""

from toolorch_jax.rollout.config import EpisodeConfig, RolloutConfig
from toolorch_jax.rollout.loop import run_episode, run_groups
from toolorch_jax.rollout.policy import EndpointPolicy, EnginePolicy, Policy, PolicyTurn, ScriptedPolicy
from toolorch_jax.rollout.summary import summarize, write_results
from toolorch_jax.rollout.trajectory import EpisodeEnd, ToolCallRecord, Trajectory, Turn, TurnEnd

__all__ = ["EndpointPolicy", "EnginePolicy", "EpisodeConfig", "EpisodeEnd", "Policy", "PolicyTurn",
           "RolloutConfig", "ScriptedPolicy", "ToolCallRecord", "Trajectory", "Turn", "TurnEnd",
           "run_episode", "run_groups", "summarize", "write_results"]
