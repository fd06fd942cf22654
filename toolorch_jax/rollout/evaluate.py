"""Evaluation: each task played `trials` times (τ²'s pass^k) by a policy named on the command line.

A policy is `gold` (the environment replays each task's gold solution: a self-check), `hf:DIR` or
`checkpoint:DIR` (the model on the in-process engine, through a Rollout), or the base URL of an
OpenAI-compatible endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Sequence

from toolorch_jax import checkpoint
from toolorch_jax.config import ConfigError
from toolorch_jax.data.task import Task
from toolorch_jax.datadir import data_path
from toolorch_jax.envs.base import Ability, Environment
from toolorch_jax.rollout.config import RolloutConfig
from toolorch_jax.distributed import allgather_lists, process_share
from toolorch_jax.rollout.loop import run_groups
from toolorch_jax.rollout.policy import EndpointPolicy, ScriptedPolicy
from toolorch_jax.rollout.trajectory import Trajectory
from toolorch_jax.tokenizer import load_tokenizer

WEIGHTS = {"hf": "hf", "checkpoint": "orbax"}  # --policy prefix -> the format it must hold


def evaluate(env: Environment, tasks: Sequence[Task], policy: str, config: RolloutConfig,
             tokenizer_path: str | None = None, model_name: str = "default",
             trials: int = 1) -> list[Trajectory]:
  """`trials` episodes per task (one group each) with the policy `policy` names (see the module
  docstring)."""
  if trials < 1:
    raise ConfigError(f"--trials: need at least 1, got {trials}")
  if policy == "gold":
    env.require(Ability.GOLD_POLICY, "--policy gold")
    tokenizer = load_tokenizer(tokenizer_path or data_path("qwen3"))
    script = lambda task: ScriptedPolicy(tokenizer, env.gold_script(task), config.enable_thinking)
    return asyncio.run(run_groups(env, script, tasks, trials, tokenizer, config))
  if policy.startswith(("http://", "https://")):
    tokenizer = load_tokenizer(tokenizer_path or data_path("qwen3"))
    endpoint = EndpointPolicy(tokenizer, policy, model_name, temperature=config.temperature,
                              enable_thinking=config.enable_thinking)
    return asyncio.run(run_groups(env, endpoint, tasks, trials, tokenizer, config))
  kind, _, path = policy.partition(":")
  if kind not in WEIGHTS or not path:
    raise ConfigError(f"--policy: '{policy}' is not gold, hf:DIR, checkpoint:DIR or an http(s) URL")
  found = checkpoint.weights_format(path)
  if found != WEIGHTS[kind]:
    raise ConfigError(f"--policy {policy}: {path} holds {found} weights")
  from toolorch_jax.rollout.engine_rollout import Rollout  # the serve extra
  from toolorch_jax.serving.loading import load_model_and_tokenizer

  model, tokenizer = load_model_and_tokenizer(path, tokenizer_path)
  with contextlib.closing(Rollout(model, tokenizer, config)) as rollout:
    share = process_share(len(tasks))  # on several processes, each plays its share on its devices
    return allgather_lists(rollout.play(env, list(tasks)[share], trials,
                                        first_group_id=share.start))
