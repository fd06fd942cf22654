"""The episode loop and the trajectory record."""

from toolorch_jax.agent.loop import LoopConfig, run_episode, run_groups
from toolorch_jax.agent.policy import EndpointPolicy, EnginePolicy, Policy, PolicyTurn, ScriptedPolicy
from toolorch_jax.agent.trajectory import ToolCallRecord, Trajectory, Turn

__all__ = ["EndpointPolicy", "EnginePolicy", "LoopConfig", "Policy", "PolicyTurn", "ScriptedPolicy",
           "ToolCallRecord", "Trajectory", "Turn", "run_episode", "run_groups"]
