"""Qwen3 building blocks in Flax NNX: RMSNorm, RoPE, grouped-query attention, SwiGLU MLP.

Numerics follow transformers' Qwen3 (the reference the parity tests compare against): norms and
softmax in float32, RoPE with the rotate-half layout, q/k RMSNorm per head before RoPE.

Projections are stored as `model.weight_layout` says (see `model/layout.py`): [in, out] or
[out, in]. Either way each side's axes are contracted as one, so XLA reads the weight in place.
"""

from __future__ import annotations

import math

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


def projection(rngs: nnx.Rngs, config: ModelConfig, inputs: tuple[tuple[int, str], ...],
               outputs: tuple[tuple[int, str], ...]) -> nnx.Param:
  """A projection from `inputs` to `outputs` ((size, logical axis) each), stored in the config's
  weight layout. Drawn [in, out] and then permuted, so a seed gives the same weights in both."""
  drawn = tuple(size for size, _ in inputs + outputs)
  axes = tuple(axis for _, axis in inputs + outputs)
  normal = nnx.initializers.normal(INIT_STD)
  if config.weight_layout == "in_out":
    return sharded_param(rngs, normal, drawn, axes, jnp.dtype(config.param_dtype))
  order = tuple(range(len(inputs), len(drawn))) + tuple(range(len(inputs)))
  init = lambda key, shape, dtype: jnp.transpose(normal(key, drawn, dtype), order)
  return sharded_param(rngs, init, tuple(drawn[i] for i in order), tuple(axes[i] for i in order),
                       jnp.dtype(config.param_dtype))


def project(x: jax.Array, weight: jax.Array, layout: str, input_axes: int = 1,
            **einsum_kwargs) -> jax.Array:
  """x [..., *in] through a weight stored [*in, *out] ("in_out") or [*out, *in] ("out_in") ->
  [..., *out], each side flattened to one axis: a contraction over two axes, or two output axes,
  made XLA transpose and copy the whole weight on every call."""
  if layout == "in_out":
    ins, outs = weight.shape[:input_axes], weight.shape[input_axes:]
    matrix, spec = weight.reshape(math.prod(ins), -1), "...i,io->...o"
  else:
    ins, outs = weight.shape[weight.ndim - input_axes:], weight.shape[:weight.ndim - input_axes]
    matrix, spec = weight.reshape(-1, math.prod(ins)), "...i,oi->...o"
  lead = x.shape[:x.ndim - input_axes]
  y = jnp.einsum(spec, x.reshape(*lead, -1), matrix.astype(x.dtype), **einsum_kwargs)
  return y.reshape(*lead, *outs)


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
    embed, heads, kv_heads = ((e, "embed"),), ((n, "heads"), (d, "head_dim")), ((k, "kv_heads"), (d, "head_dim"))
    self.q_proj = projection(rngs, config, embed, heads)
    self.k_proj = projection(rngs, config, embed, kv_heads)
    self.v_proj = projection(rngs, config, embed, kv_heads)
    self.o_proj = projection(rngs, config, heads, embed)
    self.q_norm = RMSNorm(d, config.rms_norm_eps, pdt, rngs=rngs)
    self.k_norm = RMSNorm(d, config.rms_norm_eps, pdt, rngs=rngs)

  def __call__(self, x: jax.Array, positions: jax.Array, mask: jax.Array,
               kv: tuple[jax.Array, jax.Array] | None, slots: jax.Array | None):
    """x [B, T, E]; mask [B, T, S] (True = may attend); kv: this layer's cache, written at slots."""
    cfg = self.config
    dt = x.dtype
    layout = cfg.weight_layout
    q = project(x, self.q_proj[...], layout)
    k = project(x, self.k_proj[...], layout)
    v = project(x, self.v_proj[...], layout)
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
    y = project(out, self.o_proj[...], layout, input_axes=2)
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
    self.layout = config.weight_layout
    embed, mlp = ((config.hidden_size, "embed"),), ((config.intermediate_size, "mlp"),)
    self.gate_proj = projection(rngs, config, embed, mlp)
    self.up_proj = projection(rngs, config, embed, mlp)
    self.down_proj = projection(rngs, config, mlp, embed)

  def __call__(self, x: jax.Array) -> jax.Array:
    gate = project(x, self.gate_proj[...], self.layout)
    up = project(x, self.up_proj[...], self.layout)
    hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"))
    y = project(hidden, self.down_proj[...], self.layout)
    return constrain(y, ("batch", "seq", "act_embed"))
