"""Functional KV cache for incremental decoding.

The cache is a pytree returned by every model call, never mutated in place, so it can be threaded
through `jax.jit`, donated, and sliced per slot by the serving engine. Each row has its own write
position (`lengths`), and `valid` marks which slots hold real tokens, so left-padded prompts and
rows of different lengths decode together.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from toolorch_jax.model.sharding import constrain

CACHE_AXES = ("batch", "cache_seq", "act_kv_heads", "head_dim")


@struct.dataclass
class KVCache:
  keys: tuple[jax.Array, ...]  # per layer [B, S, K, D]
  values: tuple[jax.Array, ...]  # per layer [B, S, K, D]
  valid: jax.Array  # [B, S] bool: slot holds a real (non-padding) token
  lengths: jax.Array  # [B] int32: next slot to write in each row

  @property
  def max_length(self) -> int:
    return self.valid.shape[1]

  @classmethod
  def zeros(cls, num_layers: int, batch: int, max_length: int, num_kv_heads: int, head_dim: int,
            dtype: jnp.dtype) -> "KVCache":
    shape = (batch, max_length, num_kv_heads, head_dim)
    empty = lambda: constrain(jnp.zeros(shape, dtype), CACHE_AXES)
    return cls(
        keys=tuple(empty() for _ in range(num_layers)),
        values=tuple(empty() for _ in range(num_layers)),
        valid=jnp.zeros((batch, max_length), bool),
        lengths=jnp.zeros((batch,), jnp.int32),
    )

  def write_slots(self, num_new: int) -> jax.Array:
    """[B, T] slot index each new token is written to (out-of-range writes are dropped)."""
    return self.lengths[:, None] + jnp.arange(num_new, dtype=jnp.int32)[None, :]

  def advance(self, token_mask: jax.Array) -> "KVCache":
    """Marks the next T slots per row (valid where `token_mask`) and moves the write position."""
    slots = self.write_slots(token_mask.shape[1])
    rows = jnp.arange(token_mask.shape[0])[:, None]
    valid = self.valid.at[rows, slots].set(token_mask.astype(bool), mode="drop")
    return self.replace(valid=valid, lengths=self.lengths + token_mask.shape[1])


def write_layer(cache_kv: jax.Array, new_kv: jax.Array, slots: jax.Array) -> jax.Array:
  """Scatters new keys or values [B, T, K, D] into one layer's cache at `slots` [B, T]."""
  rows = jnp.arange(new_kv.shape[0])[:, None]
  updated = cache_kv.at[rows, slots].set(new_kv.astype(cache_kv.dtype), mode="drop")
  return constrain(updated, CACHE_AXES)
