"""The Rollout: a model served by the in-process JetStream engine, turning tasks into trajectories.

It owns the engine, its driver threads, the client and the sampling policy. Training, the
evaluations before and after RL, and `toolorch eval` with a model all play episodes through it; a
trainer only consumes what it returns and hands it new weights (`update_weights`), which the engine
serves from its next prefill or decode step. Needs the `serve` extra (JetStream).
"""

from __future__ import annotations

import asyncio
from typing import Callable, Sequence

from jax.sharding import Mesh

from toolorch_jax.data.task import Task
from toolorch_jax.envs.base import Environment
from toolorch_jax.model import Qwen3
from toolorch_jax.rollout.config import RolloutConfig
from toolorch_jax.rollout.loop import run_groups
from toolorch_jax.rollout.policy import EnginePolicy, Policy
from toolorch_jax.rollout.trajectory import Trajectory
from toolorch_jax.serving.client import EngineClient
from toolorch_jax.serving.driver import Driver
from toolorch_jax.serving.engine import Engine, EngineConfig
from toolorch_jax.serving.sampling import SamplingParams
from toolorch_jax.tokenizer import Tokenizer


class Rollout:
  """Plays episodes of `model` as policy version `version`; `seed` fixes every sampled token.

  The engine serves the model's own buffers (no copy): a trainer that donates them to its update
  must call `update_weights` with the new ones before the next `play`.
  """

  def __init__(self, model: Qwen3, tokenizer: Tokenizer, config: RolloutConfig,
               mesh: Mesh | None = None, seed: int = 0, version: int = 0):
    self.config = config
    self.tokenizer = tokenizer
    self.seed = seed
    # An episode never holds more than max_context tokens, prompt included: that bounds both the
    # longest prefill (a whole episode so far) and what a slot's cache keeps. With
    # `prefix_store_rows`, a turn that ends in tool calls leaves its cache behind (in its slot,
    # then in the store): the episode's next turn prefills only the tool results and the
    # generation prompt.
    self.engine = Engine(model, tokenizer, EngineConfig(
        max_slots=config.slots, max_prefill_length=config.max_context,
        max_cache_length=config.max_context, reuse_prefixes=config.prefix_store_rows > 0,
        prefix_store_rows=config.prefix_store_rows, weight_layout=config.weight_layout),
        mesh=mesh, version=version)
    self.driver = Driver(self.engine)
    self.client = EngineClient(self.driver)

  def policy(self, temperature: float | None = None, seed: int | None = None) -> EnginePolicy:
    """The engine as a policy, sampling at `temperature` (default: the config's) with per-turn
    seeds derived from `seed` (default: the rollout's)."""
    sampling = SamplingParams(temperature=self.config.temperature if temperature is None
                              else temperature, top_p=self.config.top_p)
    return EnginePolicy(self.client, sampling, seed=self.seed if seed is None else seed)

  def play(self, env: Environment, tasks: Sequence[Task], group_size: int | None = None,
           first_group_id: int = 0,
           policy: Policy | Callable[[Task], Policy] | None = None) -> list[Trajectory]:
    """`group_size` (default: the config's) episodes of each task, ordered by group."""
    return asyncio.run(run_groups(env, policy or self.policy(), tasks,
                                  group_size or self.config.group_size, self.tokenizer,
                                  self.config, first_group_id))

  def update_weights(self, params, version: int) -> None:
    """Serves `params` (the trainer's, resharded if its mesh differs) as policy `version`."""
    self.engine.update_params(params, version)

  def close(self) -> None:
    """Stops the driver's threads (`contextlib.closing(rollout)` does it for a block)."""
    self.driver.stop()
