"""Per-slot token sampling: greedy, temperature, top-k and top-p, each slot with its own RNG."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class SamplingParams:
  """Per-request sampling settings; temperature 0 means greedy."""

  temperature: float = 1.0
  top_k: int = 0  # 0: no top-k filter
  top_p: float = 1.0
  seed: int | None = None  # None: derived from the request

  def validate(self) -> None:
    if not self.temperature >= 0:
      raise ValueError(f"temperature must be >= 0, got {self.temperature}")
    if self.top_k < 0:
      raise ValueError(f"top_k must be >= 0, got {self.top_k}")
    if not 0 < self.top_p <= 1:
      raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def _filter(scaled: jax.Array, top_k: jax.Array, top_p: jax.Array) -> jax.Array:
  """Masks logits outside each row's top-k and top-p nucleus with -inf."""
  vocab = scaled.shape[-1]
  ordered = -jnp.sort(-scaled, axis=-1)
  k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)
  ranks = jnp.arange(vocab)[None, :]
  ordered = jnp.where(ranks < k[:, None], ordered, -jnp.inf)
  probs = jax.nn.softmax(ordered, axis=-1)
  keep = (jnp.cumsum(probs, axis=-1) - probs) < top_p[:, None]  # the first token is always kept
  last = jnp.sum(keep & (ranks < k[:, None]), axis=-1) - 1
  threshold = jnp.take_along_axis(ordered, last[:, None], axis=-1)
  return jnp.where(scaled >= threshold, scaled, -jnp.inf)


def first_max_index(x: jax.Array) -> jax.Array:
  """`jnp.argmax(x, axis=-1)`, the same index (the first maximum; the first NaN if any), faster.

  XLA:CPU lowers argmax to a reduce over (value, index) pairs that it does not vectorise: on the
  engine's [32, 32768] logits it took 2.3 ms against 0.7 ms for a max and then the least index
  holding it (bench/README.md, "Decode: argmax as a max and a first index").
  """
  peak = jnp.max(x, axis=-1, keepdims=True)
  index = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
  return jnp.min(jnp.where((x == peak) | jnp.isnan(x), index, x.shape[-1]), axis=-1)


def categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
  """`jax.random.categorical(key, logits)`, the same draw: the Gumbel-max trick with the same
  noise, its argmax taken by `first_max_index`."""
  return first_max_index(jax.random.gumbel(key, logits.shape, logits.dtype) + logits)


def sample_tokens(logits: jax.Array, temperature: jax.Array, top_k: jax.Array, top_p: jax.Array,
                  keys: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(tokens [S], log-probs [S] under the distribution sampled from, next keys [S, 2]).

  logits [S, V] float32; temperature/top_p [S] float32; top_k [S] int32; keys [S, 2] uint32 raw.
  Greedy rows report the log-prob under the unscaled softmax.
  """
  greedy = temperature <= 0
  scaled = logits / jnp.where(greedy, 1.0, temperature)[:, None]
  needs_filter = jnp.any(((top_k > 0) | (top_p < 1)) & ~greedy)
  scaled = jax.lax.cond(needs_filter, _filter, lambda s, *_: s, scaled, top_k, top_p)
  scaled = jnp.where(greedy[:, None], logits, scaled)
  split = jax.vmap(lambda k: jax.random.split(jax.random.wrap_key_data(k)))(keys)
  next_keys = jax.vmap(jax.random.key_data)(split[:, 0])
  # A Gumbel draw per vocabulary entry and row is most of a small model's step: none when all
  # rows are greedy (their keys still advance, so what follows samples the same).
  sampled = jax.lax.cond(jnp.all(greedy), lambda: jnp.zeros(greedy.shape, jnp.int32),
                         lambda: jax.vmap(categorical)(split[:, 1], scaled))
  tokens = jnp.where(greedy, first_max_index(logits), sampled)
  logprobs = jnp.take_along_axis(jax.nn.log_softmax(scaled, axis=-1), tokens[:, None], axis=-1)[:, 0]
  return tokens, logprobs, next_keys
