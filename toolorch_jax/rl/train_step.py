"""One jitted, sharded optimisation step over micro-batches, for GRPO and for SFT.

The step runs one program per micro-batch, accumulating gradients of losses normalised by the whole
batch's token (or sequence) count, so the update equals the full-batch update whatever the
micro-batch size. Parameters and optimizer state keep the model's shardings; micro-batch rows are
split over the mesh's `data` and `fsdp` axes.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from toolorch_jax.config import ConfigError
from toolorch_jax.model.sharding import global_array, logical_to_spec, within
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.loss import (aggregate, chunked_token_log_probs, policy_loss_terms,
                                  token_log_probs)


@dataclasses.dataclass
class OptimConfig:
  learning_rate: float = 1e-6
  weight_decay: float = 0.01
  grad_clip: float = 1.0
  warmup_steps: int = 0  # a linear rise from 0 to learning_rate over the first steps
  # > 0: after the warmup, a cosine from learning_rate down to 0 over this many steps (0: constant)
  decay_steps: int = 0
  b1: float = 0.9
  b2: float = 0.999

  def __post_init__(self):
    for name in ("warmup_steps", "decay_steps"):
      if getattr(self, name) < 0:
        raise ConfigError(f"optim.{name} must be >= 0, got {getattr(self, name)}")


def learning_rate_schedule(config: OptimConfig) -> optax.ScalarOrSchedule:
  """The rate at each step: the warmup's rise, then constant or a cosine decay to 0. A constant
  rate stays a number, whose optimizer state (no step count) earlier checkpoints hold."""
  rate, warmup = config.learning_rate, config.warmup_steps
  if config.decay_steps:
    return optax.warmup_cosine_decay_schedule(0.0, rate, warmup, warmup + config.decay_steps)
  return optax.linear_schedule(0.0, rate, warmup) if warmup else rate


def build_optimizer(config: OptimConfig) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(config.grad_clip),
                     optax.adamw(learning_rate_schedule(config), b1=config.b1, b2=config.b2,
                                 weight_decay=config.weight_decay))


def _forward_logp(graphdef, params, mb, loss_chunk_tokens: int = 0):
  """(log-prob, entropy) of each loss entry's target [rows, E]: the trunk runs over the packed
  prefix trees, logits are taken only at the columns a target is read from (`rl.batch`), and with
  `loss_chunk_tokens` at most that many of those at a time, never [rows, P, V] at once."""
  model = nnx.merge(graphdef, params)
  hidden, _ = model.hidden_states(mb["tokens"], mb["positions"], subtree_ends=mb["subtree_ends"])
  hidden = jnp.take_along_axis(hidden, mb["loss_columns"][..., None], axis=1)
  if loss_chunk_tokens:
    chunk_len = max(1, loss_chunk_tokens // mb["tokens"].shape[0])
    logp, entropy = chunked_token_log_probs(model.unembed, hidden, mb["targets"], chunk_len)
  else:
    logp, entropy = token_log_probs(model.unembed(hidden), mb["targets"])
  entries = mb["entry_index"]
  return jnp.take_along_axis(logp, entries, axis=1), jnp.take_along_axis(entropy, entries, axis=1)


def grpo_objective(config: GRPOConfig):
  """Per-token GRPO loss from log-probs; ref/rollout log-probs come with the micro-batch, and old
  ones when a batch gets several updates. Without them the old policy is the one being updated
  (one update per batch, as the trainer does): the ratio is 1 with its gradient, and no forward
  pass is spent on old log-probs."""
  def objective(logp, entropy, mb):
    old_logp = mb["old_logp"] if "old_logp" in mb else jax.lax.stop_gradient(logp)
    loss, diag = policy_loss_terms(
        logp, old_logp, mb["advantages"], config.clip_low, config.clip_high, config.dual_clip,
        ref_logp=mb.get("ref_logp"), kl_coef=config.kl_coef, kl_estimator=config.kl_estimator,
        rollout_logp=mb["rollout_logp"] if config.tis_cap else None, tis_cap=config.tis_cap)
    if not config.entropy_coef:  # `loss - 0 * entropy` would still differentiate [T, V] terms
      return loss, diag
    return loss - config.entropy_coef * entropy, diag
  return objective


def sft_objective(logp, entropy, mb):
  """Next-token cross-entropy on the masked (assistant) tokens."""
  return -logp, {}


# XLA options every train-step program on CPU gets unless `compiler_options` sets them. The
# memory-optimised scheduler gives the same update to the bit and a faster step (bench/README.md,
# "Train step: XLA:CPU's memory-optimised scheduler"); YNNPACK's dot fusions (a dot with the
# elementwise ops around it, in place of XLA's own list, `XLA_OWN_YNN_FUSIONS`, which decode keeps)
# give the update up to rounding and a step up to 30% faster ("Train step: the YNN dot fusions by
# default"). Other backends get only what is asked for.
XLA_OWN_YNN_FUSIONS = "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE"
CPU_COMPILER_OPTIONS = {
    "xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_REDUCE",
}


def step_compiler_options(options: Mapping[str, Any] | None, platform: str) -> dict[str, Any] | None:
  """`options`, checked, over the platform's defaults (`CPU_COMPILER_OPTIONS` on "cpu"); only the
  given ones are checked, so a step without any compiles nothing extra at start-up."""
  defaults = CPU_COMPILER_OPTIONS if platform == "cpu" else {}
  return {**defaults, **(checked_compiler_options(options) or {})} or None


def checked_compiler_options(options: Mapping[str, Any] | None) -> dict[str, Any] | None:
  """`options` as `jax.jit` takes them, or None for none; an option XLA does not know, or a value
  it cannot parse, fails here with the config key rather than at the first step's compile."""
  if not options:
    return None
  options = dict(options)
  try:
    jax.jit(lambda x: x + 1, compiler_options=options).lower(jnp.float32(0)).compile()
  except jax.errors.JaxRuntimeError as err:
    raise ConfigError(f"train.compiler_options: {err}") from None
  return options


class TrainStep:
  """The jitted update (and log-prob) programs for one model graph and objective on one mesh.

  `compiler_options` are XLA's options for these programs alone (`jax.jit(compiler_options=)`),
  over `CPU_COMPILER_OPTIONS` on CPU, so a run can tune its train step without touching the
  engine's decode programs in the same process, as a process-wide `XLA_FLAGS` would."""

  def __init__(self, graphdef, optimizer: optax.GradientTransformation, objective: Callable,
               aggregation: str = "token_mean", mesh: Mesh | None = None,
               loss_chunk_tokens: int = 0, compiler_options: Mapping[str, Any] | None = None):
    self.mesh = mesh
    platform = (mesh.devices.flat[0] if mesh is not None else jax.devices()[0]).platform
    jit = functools.partial(jax.jit, compiler_options=step_compiler_options(compiler_options, platform))
    forward = lambda params, mb: _forward_logp(graphdef, params, mb, loss_chunk_tokens)
    self._logp = jit(lambda params, mb: forward(params, mb)[0])

    def loss_fn(params, mb, num_tokens, num_sequences):
      logp, entropy = forward(params, mb)
      per_token, diag = objective(logp, entropy, mb)
      loss = aggregate(per_token, mb["loss_mask"], aggregation, mb["sequence_ids"], num_sequences,
                       num_tokens)
      mask = mb["loss_mask"]
      sums = {"entropy": jnp.sum(entropy * mask)}
      sums.update({k: jnp.sum(v * mask) for k, v in diag.items()})
      return loss, sums

    def accumulate(carry, params, mb, num_tokens, num_sequences):
      grads, loss, sums = carry
      (mb_loss, mb_sums), mb_grads = jax.value_and_grad(loss_fn, has_aux=True)(
          params, mb, num_tokens, num_sequences)
      return (jax.tree.map(jnp.add, grads, mb_grads), loss + mb_loss,
              jax.tree.map(jnp.add, sums, mb_sums))

    def zeros(params, mb, num_tokens, num_sequences):
      sums = jax.eval_shape(loss_fn, params, mb, num_tokens, num_sequences)[1]
      return (jax.tree.map(jnp.zeros_like, params), jnp.float32(0),
              jax.tree.map(jnp.zeros_like, sums))

    def apply(params, opt_state, carry, num_tokens):
      grads, loss, sums = carry
      updates, opt_state = optimizer.update(grads, opt_state, params)
      metrics = {"loss": loss, "grad_norm": optax.tree.norm(grads),
                 **{k: v / jnp.maximum(num_tokens, 1.0) for k, v in sums.items()}}
      return optax.apply_updates(params, updates), opt_state, metrics

    # One program per micro-batch shape, not per micro-batch count: a batch packs into a varying
    # number of rows, and a scan over them compiled the whole step again for every new count.
    self._zeros = jit(zeros)
    self._accumulate = jit(accumulate, donate_argnums=(0,))
    self._apply = jit(apply, donate_argnums=(0, 1))
    # Micro-batch i of the placed batch, i traced: `x[i]` outside jit compiled a slice per index
    # (this compiles one per micro-batch count, a slice, not a step).
    self._micro = jit(lambda batch, i: jax.tree.map(lambda x: x[i], batch))

  def _place(self, batch: dict[str, Any]) -> dict[str, jax.Array]:
    if self.mesh is None:
      return {k: jnp.asarray(v) for k, v in batch.items()}
    with within(self.mesh):
      return {k: global_array(v, NamedSharding(self.mesh, logical_to_spec(
          (None, "batch", "seq")[-v.ndim:], v.shape))) for k, v in batch.items()}

  def log_probs(self, params, batch: dict[str, Any]) -> jax.Array:
    """[n_micro, rows, E] log-probs of the loss entries' targets under `params` (old or
    reference policy)."""
    placed = self._place(batch)
    with within(self.mesh):
      return jnp.stack([self._logp(params, self._micro(placed, i))
                        for i in range(placed["tokens"].shape[0])])

  def update(self, params, opt_state, batch: dict[str, Any], num_tokens: int, num_sequences: int):
    """One optimizer update from the gradients summed over the micro-batches of `batch`
    (`PackedBatch.micro_batches`); (params, opt_state, metrics). Donates params and opt_state."""
    placed = self._place(batch)
    num_tokens, num_sequences = jnp.float32(num_tokens), jnp.float32(num_sequences)
    with within(self.mesh):
      micro = [self._micro(placed, i) for i in range(placed["tokens"].shape[0])]
      carry = self._zeros(params, micro[0], num_tokens, num_sequences)
      for mb in micro:
        carry = self._accumulate(carry, params, mb, num_tokens, num_sequences)
      return self._apply(params, opt_state, carry, num_tokens)
