"""The GRPO trainer: rollouts on the in-process engine -> rewards -> advantages -> update -> swap.

Every step: the task stream gives `tasks_per_step` tasks; `group_size` episodes each are played
through the episode loop on the JetStream engine; rewards, group advantages and filters select
what to learn from; episodes are packed and the jitted train step updates the weights, which are
then hot-swapped into the engine as policy version `step + 1`; metrics are written and a
checkpoint saved. Rollouts are synchronous (on-policy); `grpo.max_staleness` bounds how many
versions behind an episode may be when rollouts run ahead.
"""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from toolorch_jax import checkpoint
from toolorch_jax.agent.loop import LoopConfig, run_groups
from toolorch_jax.agent.policy import EnginePolicy
from toolorch_jax.agent.trajectory import Trajectory
from toolorch_jax.config import ConfigError, to_yaml
from toolorch_jax.data import TaskStream
from toolorch_jax.envs.registry import build_env
from toolorch_jax.metrics import MetricsWriter
from toolorch_jax.model import MeshConfig, Qwen3, create_model, load_hf, load_model_config, make_mesh
from toolorch_jax.rewards import compute_rewards
from toolorch_jax.rl.batch import Episode, pack
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.grpo import select
from toolorch_jax.rl.train_step import StepFunctions, build_optimizer, grpo_objective
from toolorch_jax.tokenizer import Tokenizer, load_tokenizer


def mesh_for(config: MeshConfig):
  devices = jax.devices()
  count = config.num_devices or len(devices)
  if count > len(devices):
    raise ConfigError(f"mesh: {config} needs {count} devices, JAX has {len(devices)}")
  return make_mesh(config, devices[:count])


def initial_model(config: RunConfig, tokenizer: Tokenizer, mesh) -> Qwen3:
  """A preset with random weights (sized to the tokenizer), or the weights in `model.init_from`."""
  source = config.model.init_from
  if source:
    if checkpoint.is_model_checkpoint(source):
      model, _ = checkpoint.load_model(source, mesh=mesh)
    else:
      model, _ = load_hf(source, mesh=mesh)
  else:
    model_config = load_model_config(config.model.preset, config.model.overrides)
    if config.model.vocab_from_tokenizer:
      model_config = model_config.replace(vocab_size=tokenizer.vocab_size)
    model = create_model(model_config, mesh=mesh, seed=config.train.seed)
  if tokenizer.vocab_size > model.config.vocab_size:
    raise ConfigError(f"model.tokenizer has {tokenizer.vocab_size} ids, the model only"
                      f" {model.config.vocab_size}")
  return model


def rollout_metrics(trajectories: list[Trajectory], rewards, components, elapsed: float) -> dict:
  n = len(trajectories)
  tool_counts = collections.Counter()
  faults = collections.Counter()
  finishes = collections.Counter(t.finish for t in trajectories)
  for t in trajectories:
    tool_counts.update(t.tool_counts)
    faults.update(t.faults)
  generated = sum(sum(t.loss_mask) for t in trajectories)
  per_profile: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for t in trajectories:  # does the policy route differently per user preference?
    if t.preference and t.preference.get("name"):
      per_profile[t.preference["name"]].update(t.tool_counts)
  profile_mix = {f"profile/{name}/{tool}": count / max(sum(counts.values()), 1)
                 for name, counts in per_profile.items() for tool, count in sorted(counts.items())}
  return {
      **profile_mix,
      "reward/mean": float(np.mean(rewards)), "reward/std": float(np.std(rewards)),
      **{f"reward/{name}": float(np.mean(values)) for name, values in components.items()},
      "accuracy": float(np.mean([t.outcome >= 1.0 for t in trajectories])),
      "cost_usd": float(np.mean([t.cost_usd for t in trajectories])),
      "latency_s": float(np.mean([t.latency_s for t in trajectories])),
      "turns": float(np.mean([len(t.turns) for t in trajectories])),
      **{f"tool_calls/{name}": count / n for name, count in sorted(tool_counts.items())},
      **{f"faults/{name}": float(count) for name, count in sorted(faults.items())},
      **{f"finish/{name}": float(count) for name, count in sorted(finishes.items())},
      "rollout/episodes": float(n), "rollout/seconds": elapsed,
      "rollout/tokens_per_s": generated / max(elapsed, 1e-9),
  }


class Trainer:
  def __init__(self, config: RunConfig, workdir: str | Path, tokenizer: Tokenizer | None = None,
               env=None):
    from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams

    self.config = config
    self.workdir = Path(workdir)
    self.tokenizer = tokenizer or load_tokenizer(config.model.tokenizer)
    self.mesh = mesh_for(config.mesh)
    model = initial_model(config, self.tokenizer, self.mesh)
    self.graphdef, self.params = nnx.split(model)
    self.optimizer = build_optimizer(config.optim)
    with jax.set_mesh(self.mesh):
      self.opt_state = jax.jit(self.optimizer.init)(self.params)
    # The reference is the initial policy; a copy, because the train step donates `params`.
    self.ref_params = jax.tree.map(jnp.copy, self.params) if config.grpo.kl_coef else None
    self.steps = StepFunctions(self.graphdef, self.optimizer, grpo_objective(config.grpo),
                               config.grpo.aggregation, self.mesh)
    self.env = env or build_env(config.env)
    tasks = list(self.env.tasks(config.rollout.split))
    if not tasks:
      raise ConfigError(f"rollout.split: environment '{config.env.name}' has no tasks in"
                        f" '{config.rollout.split}'")
    self.stream = TaskStream(tasks, config.rollout.tasks_per_step, seed=config.train.seed)
    self.checkpointer = checkpoint.TrainCheckpointer(str(self.workdir / "checkpoints"),
                                                     keep=config.train.keep_checkpoints)
    self.rng = jax.random.key(config.train.seed)
    self.step = 0
    self._restore()
    r = config.rollout
    # The engine serves the trainer's own buffers (no copy); the train step donates them, and
    # `update_params` hands the engine the new ones before it decodes again.
    self.engine = Engine(model, self.tokenizer, EngineConfig(
        max_slots=r.slots, max_prefill_length=r.max_context, max_cache_length=r.max_context),
        mesh=self.mesh, version=self.step)
    if self.step:
      self.engine.update_params(self.params, self.step)
    self.driver = Driver(self.engine)
    self.client = EngineClient(self.driver)
    self.policy = EnginePolicy(self.client,
                               SamplingParams(temperature=r.temperature, top_p=r.top_p),
                               seed=config.train.seed)
    self.loop_config = LoopConfig(max_turns=r.max_turns, max_context=r.max_context,
                                  max_new_tokens=r.max_new_tokens, enable_thinking=r.enable_thinking,
                                  concurrency=r.concurrency)

  def _restore(self) -> None:
    if self.checkpointer.latest_step() is None:
      return
    restored = self.checkpointer.restore(None, checkpoint.abstract_like(self.params),
                                         checkpoint.abstract_like(self.opt_state))
    self.step, self.params, self.opt_state, self.rng, data_state = restored[:5]
    self.stream.set_state(data_state)

  def train_on(self, trajectories: list[Trajectory]) -> dict:
    """Rewards, advantages, filters and one update; returns the step's training metrics."""
    rewards, components = compute_rewards(trajectories, self.config.rewards)
    advantages, keep, filtered = select(trajectories, rewards, self.config.grpo, self.step)
    metrics = dict(filtered)
    metrics["train/kept_episodes"] = float(keep.sum())
    kept = [Episode(t.token_ids, t.loss_mask, float(a), t.logprobs)
            for t, a, k in zip(trajectories, advantages, keep) if k]
    metrics["rewards"], metrics["components"] = rewards, components
    if not kept:
      return metrics
    rows = self.config.train.micro_batch_rows
    batch = pack(kept, self.config.train.seq_len, rows_multiple=rows, pad_id=self.tokenizer.pad_id)
    micro = batch.micro_batches(batch.tokens.shape[0] // rows)
    start = time.perf_counter()
    if self.ref_params is not None:
      micro["ref_logp"] = self.steps.log_probs(self.ref_params, micro)
    self.params, self.opt_state, step_metrics = self.steps.update(
        self.params, self.opt_state, micro, batch.num_tokens, batch.num_sequences)
    step_metrics = jax.device_get(step_metrics)
    elapsed = time.perf_counter() - start
    metrics.update({
        "train/loss": float(step_metrics["loss"]), "train/grad_norm": float(step_metrics["grad_norm"]),
        "train/entropy": float(step_metrics["entropy"]), "train/kl": float(step_metrics["kl"]),
        "train/clip_fraction": float(step_metrics["clipped"]),
        "train/ratio": float(step_metrics["ratio"]), "train/tokens": float(batch.num_tokens),
        "train/truncated_episodes": float(batch.truncated),
        "train/tokens_per_s": float(batch.tokens.size) / max(elapsed, 1e-9), "train/seconds": elapsed})
    return metrics

  def run(self) -> None:
    total = self.config.train.steps
    writer = MetricsWriter(str(self.workdir), total, use_tensorboard=self.config.train.tensorboard,
                           progress=self.config.train.progress)
    (self.workdir / "config.yaml").write_text(to_yaml(self.config))
    try:
      while self.step < total:
        start = time.perf_counter()
        tasks = next(self.stream)
        first_group = self.step * self.config.rollout.tasks_per_step
        trajectories = asyncio.run(run_groups(self.env, self.policy, tasks, self.config.rollout.group_size,
                                              self.tokenizer, self.loop_config, first_group))
        rollout_seconds = time.perf_counter() - start
        metrics = self.train_on(trajectories)
        rewards, components = metrics.pop("rewards"), metrics.pop("components")
        metrics.update(rollout_metrics(trajectories, rewards, components, rollout_seconds))
        self.step += 1
        self.engine.update_params(self.params, self.step)
        metrics["policy_version"] = float(self.step)
        metrics["step_seconds"] = time.perf_counter() - start
        writer.write(self.step, metrics)
        if self.step % self.config.train.checkpoint_every == 0 or self.step == total:
          self.checkpointer.save(self.step, self.params, self.opt_state, self.rng,
                                 self.stream.get_state(), to_yaml(self.config),
                                 {"policy_version": self.step})
      self.checkpointer.wait()
    finally:
      writer.close()

  def close(self) -> None:
    """Stops the engine's driver threads."""
    self.driver.stop()

  def model(self) -> Qwen3:
    return nnx.merge(self.graphdef, self.params)
