"""The clipped policy-gradient loss with dual clip, optional KL to a reference, and TIS."""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def token_log_probs(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(log p(target) [B, T], entropy [B, T]) from float32 logits [B, T, V]."""
  logits = logits.astype(jnp.float32)
  logp_all = jax.nn.log_softmax(logits, axis=-1)
  entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
  return target_log_probs(logits, targets), entropy


def _shifted(logits: jax.Array) -> jax.Array:
  return logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))


@jax.custom_vjp
def target_log_probs(logits: jax.Array, targets: jax.Array) -> jax.Array:
  """log_softmax(logits)[targets] [B, T], whose gradient is one pass over [B, T, V]
  (one-hot minus softmax, times the cotangent), the same bits autodiff gives through
  `log_softmax` and a gather, without the scatter into zeros and the copies it costs."""
  shifted = _shifted(logits)
  log_total = jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
  return (jnp.take_along_axis(shifted, targets[..., None], axis=-1) - log_total)[..., 0]


def _target_log_probs_forward(logits, targets):
  return target_log_probs(logits, targets), (logits, targets)


def _target_log_probs_backward(residuals, cotangent):
  logits, targets = residuals
  exp = jnp.exp(_shifted(logits))
  total = jnp.sum(exp, axis=-1)
  is_target = jnp.arange(logits.shape[-1]) == targets[..., None]
  # Grouped as autodiff groups it: d log_total = -g, d total = -g / total, d exp = that * exp.
  grad = jnp.where(is_target, cotangent[..., None], 0.0) + ((-cotangent) / total)[..., None] * exp
  return grad, None


target_log_probs.defvjp(_target_log_probs_forward, _target_log_probs_backward)


def chunked_token_log_probs(unembed: Callable[[jax.Array], jax.Array], hidden: jax.Array,
                            targets: jax.Array, chunk_len: int) -> tuple[jax.Array, jax.Array]:
  """`token_log_probs(unembed(hidden), targets)` taken `chunk_len` positions of every row at a
  time, so only [B, chunk_len, V] logits exist at once: each chunk is rematerialised in the
  backward pass (jax.checkpoint) instead of its logits being kept. hidden [B, T, E]; the last
  chunk is padded and its padding cut off."""
  rows, length = targets.shape
  count = -(-length // chunk_len)
  pad = count * chunk_len - length
  hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))
  targets = jnp.pad(targets, ((0, 0), (0, pad)))
  chunks = (hidden.reshape(rows, count, chunk_len, -1).swapaxes(0, 1),
            targets.reshape(rows, count, chunk_len).swapaxes(0, 1))

  @jax.checkpoint
  def one_chunk(chunk):
    x, chunk_targets = chunk
    return token_log_probs(unembed(x), chunk_targets)

  logp, entropy = jax.lax.map(one_chunk, chunks)
  unchunk = lambda a: a.swapaxes(0, 1).reshape(rows, count * chunk_len)[:, :length]
  return unchunk(logp), unchunk(entropy)


KL_ESTIMATORS = ("mse", "k1", "low_var_kl")


def kl_penalty(logp, ref_logp, estimator: str = "mse"):
  """Per-token KL to the reference from sampled tokens, in verl's names: "mse" (k2) =
  1/2 (log p - log p_ref)^2; "k1" = log p - log p_ref; "low_var_kl" (k3, Schulman's estimator) =
  p_ref/p - log(p_ref/p) - 1, clamped to [-10, 10]."""
  delta = logp - ref_logp
  if estimator == "mse":
    return 0.5 * delta**2
  if estimator == "k1":
    return delta
  if estimator == "low_var_kl":
    return jnp.clip(jnp.exp(-delta) + delta - 1.0, -10.0, 10.0)
  raise ValueError(f"unknown KL estimator '{estimator}' (one of {KL_ESTIMATORS})")


def policy_loss_terms(logp, old_logp, advantages, clip_low=0.2, clip_high=0.28, dual_clip=10.0,
                      ref_logp=None, kl_coef=0.0, rollout_logp=None, tis_cap=None,
                      kl_estimator="mse"):
  """Per-token loss and diagnostics; all arrays [B, T], advantages broadcast per token.

  PPO: max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)); for A < 0 the dual clip caps the loss
  at -A * dual_clip. KL: `kl_penalty` with `kl_estimator`. TIS: multiply by the truncated ratio
  of trainer to rollout probabilities (no gradient through the weight).
  """
  ratio = jnp.exp(logp - old_logp)
  unclipped = -advantages * ratio
  clipped = -advantages * jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high)
  loss = jnp.maximum(unclipped, clipped)
  is_clipped = clipped > unclipped
  if dual_clip is not None:
    capped = jnp.minimum(loss, -advantages * dual_clip)
    is_clipped = is_clipped | ((advantages < 0) & (capped < loss))
    loss = jnp.where(advantages < 0, capped, loss)
  if rollout_logp is not None and tis_cap is not None:
    loss = loss * jax.lax.stop_gradient(jnp.minimum(jnp.exp(old_logp - rollout_logp), tis_cap))
  kl = jnp.zeros_like(loss) if ref_logp is None else kl_penalty(logp, ref_logp, kl_estimator)
  return loss + kl_coef * kl, {"ratio": ratio, "clipped": is_clipped.astype(jnp.float32), "kl": kl}


def aggregate(per_token: jax.Array, mask: jax.Array, mode: str, segments: jax.Array | None = None,
              num_sequences: jax.Array | None = None, num_tokens: jax.Array | None = None) -> jax.Array:
  """token_mean: sum over all loss tokens / their count; sequence_mean: mean over sequences of
  each sequence's token mean (sequences identified per row by `segments` ids, 0 = none). Normalisers may be given
  for the whole batch so that micro-batches add up to the full-batch value."""
  mask = mask.astype(jnp.float32)
  if mode == "token_mean":
    total = jnp.sum(mask) if num_tokens is None else num_tokens
    return jnp.sum(per_token * mask) / jnp.maximum(total, 1.0)
  if mode == "sequence_mean":
    rows, length = per_token.shape
    ids = (jnp.arange(rows)[:, None] * (length + 1) + segments).reshape(-1)  # one id per sequence
    seq_sum = jax.ops.segment_sum((per_token * mask).reshape(-1), ids, num_segments=rows * (length + 1))
    seq_len = jax.ops.segment_sum(mask.reshape(-1), ids, num_segments=rows * (length + 1))
    seq_mean = jnp.where(seq_len > 0, seq_sum / jnp.maximum(seq_len, 1.0), 0.0)
    count = jnp.sum(seq_len > 0) if num_sequences is None else num_sequences
    return jnp.sum(seq_mean) / jnp.maximum(count, 1.0)
  raise ValueError(f"unknown loss aggregation '{mode}'")
