"""Qwen3 building blocks in Flax NNX: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP.

Numerics follow transformers' Qwen3 (the reference the parity tests compare against): norms and
softmax in float32, RoPE with the rotate-half layout, q/k RMSNorm per head before RoPE.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from toolorch_jax.model.cache import write_layer
from toolorch_jax.model.config import ModelConfig
from toolorch_jax.model.sharding import constrain, has_mesh, logical_to_spec

INIT_STD = 0.02  # transformers' initializer_range for Qwen3


def sharded_param(rngs: nnx.Rngs, init, shape: tuple[int, ...], logical_axes: tuple[str | None, ...],
                  dtype: jnp.dtype) -> nnx.Param:
  """A parameter tagged with logical axes, created already sharded when a mesh is set."""
  spec = tuple(logical_to_spec(logical_axes, shape)) if has_mesh() else None
  return nnx.Param(init(rngs.params(), shape, dtype), out_sharding=spec, logical_axes=logical_axes)


class RMSNorm(nnx.Module):
  """HF Qwen3RMSNorm: normalise in float32, cast back, then scale."""

  def __init__(self, dim: int, eps: float, param_dtype: jnp.dtype, *, rngs: nnx.Rngs):
    self.eps = eps
    self.scale = sharded_param(rngs, nnx.initializers.ones, (dim,), ("norm",), param_dtype)

  def __call__(self, x: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
    return self.scale[...].astype(x.dtype) * normed.astype(x.dtype)


def rope(x: jax.Array, positions: jax.Array, theta: float) -> jax.Array:
  """Rotary embedding, rotate-half layout; x [B, T, H, D], positions [B, T]."""
  dim = x.shape[-1]
  inv_freq = 1.0 / (theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
  freqs = positions.astype(jnp.float32)[..., None] * inv_freq  # [B, T, D/2]
  angles = jnp.concatenate([freqs, freqs], axis=-1)[:, :, None, :]
  cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
  half = dim // 2
  rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
  return x * cos + rotated * sin


class Attention(nnx.Module):
  """Grouped-query attention with per-head q/k RMSNorm; optionally reads and writes a KV cache."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    self.config = config
    e, n, k, d = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
    pdt = jnp.dtype(config.param_dtype)
    init = nnx.initializers.normal(INIT_STD)
    self.q_proj = sharded_param(rngs, init, (e, n, d), ("embed", "heads", "head_dim"), pdt)
    self.k_proj = sharded_param(rngs, init, (e, k, d), ("embed", "kv_heads", "head_dim"), pdt)
    self.v_proj = sharded_param(rngs, init, (e, k, d), ("embed", "kv_heads", "head_dim"), pdt)
    self.o_proj = sharded_param(rngs, init, (n, d, e), ("heads", "head_dim", "embed"), pdt)
    self.q_norm = RMSNorm(d, config.rms_norm_eps, pdt, rngs=rngs)
    self.k_norm = RMSNorm(d, config.rms_norm_eps, pdt, rngs=rngs)

  def __call__(self, x: jax.Array, positions: jax.Array, mask: jax.Array,
               kv: tuple[jax.Array, jax.Array] | None, slots: jax.Array | None):
    """x [B, T, E]; mask [B, T, S] (True = may attend); kv: this layer's cache, written at slots."""
    cfg = self.config
    dt = x.dtype
    q = jnp.einsum("bte,end->btnd", x, self.q_proj[...].astype(dt))
    k = jnp.einsum("bte,ekd->btkd", x, self.k_proj[...].astype(dt))
    v = jnp.einsum("bte,ekd->btkd", x, self.v_proj[...].astype(dt))
    q = rope(self.q_norm(q), positions, cfg.rope_theta)
    k = rope(self.k_norm(k), positions, cfg.rope_theta)
    q = constrain(q, ("batch", "seq", "act_heads", "head_dim"))
    if kv is not None:
      kv = (write_layer(kv[0], k, slots), write_layer(kv[1], v, slots))
      k, v = kv[0].astype(dt), kv[1].astype(dt)
    b, t, n, d = q.shape
    q = q.reshape(b, t, cfg.num_kv_heads, n // cfg.num_kv_heads, d)
    if t == 1:
      out = _one_query_attention(q, k, v, mask)
    elif kv is None and 0 < cfg.attention_query_block < t:
      out = _causal_block_attention(q, k, v, mask, cfg.attention_query_block)
    else:
      out = _attention(q, k, v, mask)
    out = out.astype(dt)
    out = constrain(out.reshape(b, t, n, d), ("batch", "seq", "act_heads", "head_dim"))
    # One [n * d, e] matrix, read in place: contracting (heads, head_dim) as two axes made XLA
    # transpose and copy the whole weight on every call.
    y = jnp.einsum("btf,fe->bte", out.reshape(b, t, n * d), self.o_proj[...].astype(dt).reshape(n * d, -1))
    return constrain(y, ("batch", "seq", "act_embed")), kv


def _attention(q, k, v, mask):
  """Grouped-query attention as two batched matmuls; q [B, T, K, G, D], k/v [B, S, K, D], mask
  [B, T, S] -> [B, T, K, G, D] (float32 scores and softmax)."""
  scores = jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32)
  scores = scores * (q.shape[-1] ** -0.5)
  scores = jnp.where(mask[:, None, None], scores, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
  return jnp.einsum("bkgts,bskd->btkgd", probs, v)


def _causal_block_attention(q, k, v, mask, query_block: int):
  """`_attention` of a causal pass (the keys are the queries' own columns and no query sees a key
  after its own) in blocks of `query_block` queries, each over the keys up to its last query. The
  keys skipped are masked for the whole block (their weights are exactly 0), so every query that
  sees a key gets the whole product's output up to rounding (the matmuls' shapes change).
  Unrolled: T / query_block blocks in the program."""
  t = q.shape[1]
  outputs = []
  for start in range(0, t, query_block):
    end = min(t, start + query_block)
    outputs.append(_attention(q[:, start:end], k[:, :end], v[:, :end], mask[:, start:end, :end]))
  return jnp.concatenate(outputs, axis=1)


def _one_query_attention(q, k, v, mask):
  """`_attention` for one query per row (a decode step), as products summed in float32 over the
  cache's own layout: the batched matmuls made XLA copy the whole cache into a transposed layout
  per layer and step, where a decode step is already bound by reading it once."""
  scores = jnp.sum(q[:, 0, None].astype(jnp.float32) * k[:, :, :, None, :].astype(jnp.float32), axis=-1)
  scores = scores * (q.shape[-1] ** -0.5)  # [B, S, K, G]
  scores = jnp.where(mask[:, 0, :, None, None], scores, jnp.finfo(jnp.float32).min)
  probs = jax.nn.softmax(scores, axis=1).astype(v.dtype).astype(jnp.float32)  # as `_attention` rounds
  return jnp.sum(probs[..., None] * v[:, :, :, None, :].astype(jnp.float32), axis=1)[:, None]


class MLP(nnx.Module):
  """SwiGLU: down(silu(gate(x)) * up(x))."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    e, f = config.hidden_size, config.intermediate_size
    pdt = jnp.dtype(config.param_dtype)
    init = nnx.initializers.normal(INIT_STD)
    self.gate_proj = sharded_param(rngs, init, (e, f), ("embed", "mlp"), pdt)
    self.up_proj = sharded_param(rngs, init, (e, f), ("embed", "mlp"), pdt)
    self.down_proj = sharded_param(rngs, init, (f, e), ("mlp", "embed"), pdt)

  def __call__(self, x: jax.Array) -> jax.Array:
    dt = x.dtype
    gate = jnp.einsum("bte,ef->btf", x, self.gate_proj[...].astype(dt))
    up = jnp.einsum("bte,ef->btf", x, self.up_proj[...].astype(dt))
    hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"))
    y = jnp.einsum("btf,fe->bte", hidden, self.down_proj[...].astype(dt))
    return constrain(y, ("batch", "seq", "act_embed"))
