"""The GRPO trainer: it consumes trajectories and hands back weights.

Every step: the task stream gives `tasks_per_step` tasks; the Rollout plays `group_size` episodes
of each; rewards, group advantages and filters select what to learn from; the learner packs the
kept episodes and makes one update; the new weights go back to the Rollout as policy version
`step`. In a job of several processes, each plays its share of the step's tasks on the devices of
its own host and every process learns from all episodes, so a step's update is the same whatever
the number of processes.

`grpo.max_staleness` = s > 0 runs rollouts ahead of the update, so the engine decodes and waits
on tools while the trainer computes. The schedule is fixed by a rule, not by timing: the episodes
of step j are played entirely by policy version max(0, j - 1 - s), and each batch starts as soon as
that version exists (the first s + 1 batches, up front, by version 0). Batches played at once have
different versions, so each gets an engine of its own, round robin over the `rollout.engines`
Rollouts; a batch whose engine is still playing an earlier one waits for it. With one engine, step
k plays step k + s during its update; with s + 1 engines, step k + s also overlaps the wait for
step k's episodes. Weights change in an engine only between two of its batches, never inside an
episode. The s batches played ahead are kept in each checkpoint (this process's share, in its data
state), so a resumed run trains on exactly what the uninterrupted one would have. (Nothing is played
past `train.steps`, so a run continued to more steps than it was started with plays the missing
batches up front too, on the weights it has: it is not the run that had the larger `train.steps`
from the start.) s = 0 is the synchronous loop: play, update, hand the engine the new weights.
Stale episodes are weighted by the truncated importance ratio of trainer to rollout probabilities
when `grpo.tis_cap` is set.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from toolorch_jax.config import to_yaml
from toolorch_jax.data.stream import TaskStream
from toolorch_jax.distributed import allgather_lists
from toolorch_jax.envs.base import Ability, Environment
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
from toolorch_jax.data.task import Task
from toolorch_jax.rollout.trajectory import Trajectory
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer

TRAINING_FIGURES = ("loss", "grad_norm", "entropy", "kl", "ratio", "tokens", "tokens_per_s",
                    "shared_prefix", "seconds")


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


def decision_metrics(env: Environment, trajectories: list[Trajectory]) -> dict:
  """A step's decision counts per profile (summed over a window of steps, the report's
  `decision_shares` of them are its breakdown), for environments that break them down."""
  if Ability.DECISIONS not in env.abilities():
    return {}
  per_profile: dict[str, list] = collections.defaultdict(list)
  for t in trajectories:
    per_profile[(t.preference or {}).get("name") or "all"].append(t.calls)
  return {f"decisions/{name}/{key}": float(count) for name, episodes in sorted(per_profile.items())
          for key, count in env.decisions(episodes).items()}


@dataclasses.dataclass
class PlayedBatch:
  """One step's episodes as this process played them (its share, before the exchange)."""

  episodes: list[Trajectory]
  seconds: float  # wall time of the play

  def to_json(self) -> dict[str, Any]:
    return {"episodes": [t.to_dict() for t in self.episodes], "seconds": self.seconds}

  @classmethod
  def from_json(cls, data: dict[str, Any]) -> "PlayedBatch":
    return cls([Trajectory.from_dict(t) for t in data["episodes"]], data["seconds"])


def finished(batch: PlayedBatch) -> Future[PlayedBatch]:
  """`batch` as a batch whose play is over (one restored from a checkpoint)."""
  future: Future[PlayedBatch] = Future()
  future.set_result(batch)
  return future


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
    # The batches of the steps after the current one (max_staleness > 0), finished or still
    # playing, oldest first.
    self.ahead: collections.deque[Future[PlayedBatch]] = collections.deque()
    data_state = self.learner.restore()
    if data_state is not None:
      self.ahead.extend(finished(PlayedBatch.from_json(b))
                        for b in data_state.pop("played_ahead", []))
      self.stream.set_state(data_state)

  @property
  def step(self) -> int:
    return self.learner.step

  def model(self) -> Qwen3:
    """The policy as it stands (what a Rollout serves)."""
    return self.learner.model()

  def data_state(self) -> dict[str, Any]:
    """What a checkpoint keeps of this process's data: the task stream, and the episodes played
    ahead (only when there are some, so synchronous runs write what they always did), waiting
    for those still playing."""
    state = self.stream.get_state()
    if self.ahead:
      state["played_ahead"] = [batch.result().to_json() for batch in self.ahead]
    return state

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

  def play(self, rollout: Rollout, tasks: list[Task], step: int) -> PlayedBatch:
    """This process's share `tasks` of step `step`'s episodes, played on `rollout` as it serves."""
    start = time.perf_counter()
    first_group_id = (step - 1) * self.config.rollout.tasks_per_step + self.stream.offset
    episodes = rollout.play(self.env, tasks, first_group_id=first_group_id)
    return PlayedBatch(episodes, time.perf_counter() - start)

  def learn_from(self, batch: PlayedBatch, step: int) -> dict:
    """Every process's episodes of `batch` (step `step`) and one update on them; the metrics."""
    trajectories = allgather_lists(batch.episodes)
    metrics, rewards, components = self.train_on(trajectories)
    metrics.update(rollout_metrics(trajectories, rewards, components, batch.seconds))
    metrics.update(decision_metrics(self.env, trajectories))
    versions = [min(t.policy_versions) for t in trajectories if t.policy_versions]
    metrics["rollout/staleness"] = float(step - 1 - min(versions)) if versions else 0.0
    return metrics

  def run(self, rollout: Rollout, more_rollouts: Sequence[Rollout] = ()) -> None:
    """Trains to `train.steps`, playing each step's episodes on `rollout` (ahead of the update
    when `grpo.max_staleness` > 0, round robin over it and `more_rollouts`, see the module
    docstring); `rollout` serves the last update when it returns."""
    engines = [rollout, *more_rollouts]
    if self.config.grpo.max_staleness == 0:
      if more_rollouts:
        raise ValueError("more rollouts than one need grpo.max_staleness > 0")
      self._run_synchronous(rollout)
      return
    with ThreadPoolExecutor(max_workers=len(engines), thread_name_prefix="rollout-ahead") as pool:
      self._run_ahead(engines, pool)
    rollout.update_weights(self.learner.params, self.step)

  def _run_synchronous(self, rollout: Rollout) -> None:
    def one_step(step: int) -> dict:
      # Each process plays its share on its own engine; every process then learns from them all.
      batch = self.play(rollout, next(self.stream), step)
      metrics = self.learn_from(batch, step)
      rollout.update_weights(self.learner.params, step)
      metrics["policy_version"] = float(step)
      metrics["rollout/wait_seconds"] = batch.seconds
      return metrics

    self.learner.run(one_step, to_yaml(self.config), data_state=self.data_state,
                     extras=lambda step: {"policy_version": step})

  def _run_ahead(self, engines: list[Rollout], pool: ThreadPoolExecutor) -> None:
    staleness, total = self.config.grpo.max_staleness, self.config.train.steps

    def one_step(step: int) -> dict:
      start = time.perf_counter()
      # Every step up to step + s (none past the last) is played or playing by the current
      # version (self.step, which is step - 1) or an earlier one; what is not starts now.
      served = None
      for later in range(step + len(self.ahead), min(step + staleness, total) + 1):
        engine = engines[later % len(engines)]
        if later - len(engines) >= step:  # this engine still plays an earlier step's batch
          self.ahead[later - len(engines) - step].result()
        if served is None:
          # A copy: the update donates the trainer's buffers while the engines still decode.
          served = jax.tree.map(jnp.copy, self.learner.params)
        engine.update_weights(served, self.step)
        self.ahead.append(pool.submit(self.play, engine, next(self.stream), later))
      batch = self.ahead.popleft().result()
      waited = time.perf_counter() - start
      metrics = self.learn_from(batch, step)
      metrics["policy_version"] = float(step)
      metrics["rollout/wait_seconds"] = waited
      return metrics

    self.learner.run(one_step, to_yaml(self.config), data_state=self.data_state,
                     extras=lambda step: {"policy_version": step})
