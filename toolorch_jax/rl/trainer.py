"""The GRPO trainer: it consumes trajectories and hands back weights.

Every step: the task stream gives `tasks_per_step` tasks; the Rollout plays `group_size` episodes
of each; rewards, group advantages and filters select what to learn from; the learner packs the
kept episodes and makes one update; the new weights go back to the Rollout as policy version
`step`. Rollouts are synchronous (on-policy); `grpo.max_staleness` bounds how many versions behind
an episode may be when rollouts run ahead. In a job of several processes, each plays its share of
the step's tasks on the devices of its own host and every process learns from all episodes, so a
step's update is the same whatever the number of processes.
"""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from toolorch_jax.config import to_yaml
from toolorch_jax.data.stream import TaskStream
from toolorch_jax.distributed import allgather_lists
from toolorch_jax.envs.base import Environment
from toolorch_jax.envs.registry import build_env
from toolorch_jax.model import Qwen3
from toolorch_jax.rewards import compute_rewards
from toolorch_jax.rl.batch import Sample
from toolorch_jax.rl.checks import tasks_of
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.grpo import weigh_and_filter
from toolorch_jax.rl.learner import Learner
from toolorch_jax.rl.train_step import grpo_objective
from toolorch_jax.rollout.engine_rollout import Rollout
from toolorch_jax.rollout.summary import summarize
from toolorch_jax.rollout.trajectory import Trajectory
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer

TRAINING_FIGURES = ("loss", "grad_norm", "entropy", "kl", "ratio", "tokens", "tokens_per_s",
                    "seconds")


def rollout_metrics(trajectories: list[Trajectory], rewards, components, elapsed: float) -> dict:
  """A step's rollout figures, from the same summary evaluation writes."""
  summary = summarize(trajectories)
  generated = sum(sum(t.loss_mask) for t in trajectories)
  return {
      **{f"profile/{name}/{tool}": share for name, mix in summary["profile_tool_mix"].items()
         for tool, share in mix.items()},
      "reward/mean": float(rewards.mean()), "reward/std": float(rewards.std()),
      **{f"reward/{name}": float(values.mean()) for name, values in components.items()},
      "accuracy": summary["success_rate"], "cost_usd": summary["mean_cost_usd"],
      "latency_s": summary["mean_latency_s"], "turns": summary["mean_turns"],
      **{f"tool_calls/{name}": count for name, count in summary["calls_per_episode"].items()},
      **{f"faults/{name}": float(count) for name, count in sorted(summary["faults"].items())},
      **{f"finish/{name}": float(count) for name, count in sorted(summary["finish"].items())},
      "rollout/episodes": float(len(trajectories)), "rollout/seconds": elapsed,
      "rollout/tokens_per_s": generated / max(elapsed, 1e-9),
  }


class Trainer:
  """GRPO on `config.env` in `workdir`, resuming from the latest checkpoint there."""

  def __init__(self, config: RunConfig, workdir: str | Path, tokenizer: Tokenizer | None = None,
               env: Environment | None = None):
    self.config = config
    self.tokenizer = tokenizer or load_tokenizer(config.model.tokenizer)
    self.env = env or build_env(config.env)
    self.learner = Learner(config.model, config.optim, config.train, config.mesh,
                           grpo_objective(config.grpo), config.grpo.aggregation, self.tokenizer,
                           workdir)
    # The reference is the initial policy; a copy, because the update donates the parameters.
    self.ref_params = (jax.tree.map(jnp.copy, self.learner.params) if config.grpo.kl_coef
                       else None)
    tasks = tasks_of(self.env, config.rollout.split, "rollout.split")
    # Each process plays its share of every step's tasks (see TaskStream).
    self.stream = TaskStream(tasks, config.rollout.tasks_per_step, seed=config.train.seed,
                             shard=(jax.process_index(), jax.process_count()))
    data_state = self.learner.restore()
    if data_state is not None:
      self.stream.set_state(data_state)

  @property
  def step(self) -> int:
    return self.learner.step

  def model(self) -> Qwen3:
    """The policy as it stands (what a Rollout serves)."""
    return self.learner.model()

  def train_on(self, trajectories: list[Trajectory]) -> tuple[dict, np.ndarray, dict]:
    """Rewards, advantages, filters and one update: (the step's training metrics, the composite
    reward per trajectory, each reward component per trajectory)."""
    rewards, components = compute_rewards(trajectories, self.config.rewards)
    advantages, keep, filtered = weigh_and_filter(trajectories, rewards, self.config.grpo,
                                                  self.learner.step)
    metrics = {**filtered, "train/kept_episodes": float(keep.sum())}
    kept = [Sample(t.token_ids, t.loss_mask, float(a), t.logprobs)
            for t, a, k in zip(trajectories, advantages, keep) if k]
    if kept:
      figures = self.learner.update(kept, self.ref_params)
      metrics.update({f"train/{name}": figures[name] for name in TRAINING_FIGURES})
      metrics["train/clip_fraction"] = figures["clipped"]
      metrics["train/truncated_episodes"] = figures["truncated"]
    return metrics, rewards, components

  def run(self, rollout: Rollout) -> None:
    """Trains to `train.steps`, playing each step's episodes on `rollout` and handing it the
    updated weights after every update."""
    per_step = self.config.rollout.tasks_per_step

    def one_step(step: int) -> dict:
      start = time.perf_counter()
      # Each process plays its share on its own engine; every process then learns from them all.
      mine = rollout.play(self.env, next(self.stream),
                          first_group_id=(step - 1) * per_step + self.stream.offset)
      trajectories = allgather_lists(mine)
      elapsed = time.perf_counter() - start
      metrics, rewards, components = self.train_on(trajectories)
      metrics.update(rollout_metrics(trajectories, rewards, components, elapsed))
      rollout.update_weights(self.learner.params, step)
      metrics["policy_version"] = float(step)
      return metrics

    self.learner.run(one_step, to_yaml(self.config), data_state=self.stream.get_state,
                     extras=lambda step: {"policy_version": step})
