"""The Qwen3 decoder: `model(tokens, positions, cache, attention_mask) -> (float32 logits, cache)`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from toolorch_jax.model.cache import KVCache
from toolorch_jax.model.config import ModelConfig
from toolorch_jax.model.layers import INIT_STD, MLP, Attention, RMSNorm, project, projection, sharded_param
from toolorch_jax.model.sharding import constrain, logical_to_spec, transfer

REMAT = {
    "full": None,  # jax.checkpoint's default: save nothing, recompute the layer in the backward pass
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
}


class DecoderLayer(nnx.Module):
  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    pdt = jnp.dtype(config.param_dtype)
    self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, pdt, rngs=rngs)
    self.attn = Attention(config, rngs=rngs)
    self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, pdt, rngs=rngs)
    self.mlp = MLP(config, rngs=rngs)

  def __call__(self, x, positions, mask, kv, slots):
    h, kv = self.attn(self.input_norm(x), positions, mask, kv, slots)
    x = x + h
    return x + self.mlp(self.post_attn_norm(x)), kv


def _layer_step(layer: DecoderLayer, x, positions, mask, kv, slots):
  return layer(x, positions, mask, kv, slots)


def _rematerialised_layer_step(policy):
  """`_layer_step` under `jax.checkpoint`, taking the layer's split state as a plain input. Unlike
  `nnx.remat`, which writes the layer's state back after the call, it runs inside any transform
  (the engine's `lax.map` and `while_loop`) whatever trace the layer was merged in: Flax refuses
  that write across trace levels."""
  def step(layer, x, positions, mask, kv, slots):
    graphdef, state = nnx.split(layer)
    pure = lambda state, *args: _layer_step(nnx.merge(graphdef, state), *args)
    return jax.checkpoint(pure, policy=policy)(state, x, positions, mask, kv, slots)

  return step


class Qwen3(nnx.Module):
  """Qwen3ForCausalLM as a Flax NNX module; parameters carry logical-axis sharding annotations."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    self.config = config
    pdt = jnp.dtype(config.param_dtype)
    init = nnx.initializers.normal(INIT_STD)
    v, e = config.vocab_size, config.hidden_size
    self.embedding = sharded_param(rngs, init, (v, e), ("vocab", "embed"), pdt)
    self.layers = nnx.List([DecoderLayer(config, rngs=rngs) for _ in range(config.num_layers)])
    self.final_norm = RMSNorm(e, config.rms_norm_eps, pdt, rngs=rngs)
    self.lm_head = (None if config.tie_word_embeddings
                    else projection(rngs, config, ((e, "embed"),), ((v, "vocab"),)))

  def init_cache(self, batch_size: int, max_length: int) -> KVCache:
    """An empty KV cache for `batch_size` rows of up to `max_length` tokens."""
    cfg = self.config
    return KVCache.zeros(cfg.num_layers, batch_size, max_length, cfg.num_kv_heads, cfg.head_dim,
                         jnp.dtype(cfg.dtype))

  def __call__(
      self,
      tokens: jax.Array,
      positions: jax.Array,
      cache: KVCache | None = None,
      attention_mask: jax.Array | None = None,
      segment_ids: jax.Array | None = None,
      logits_at: jax.Array | None = None,
      subtree_ends: jax.Array | None = None,
  ) -> tuple[jax.Array, KVCache | None]:
    """Logits [B, T, V] in float32 and the updated cache.

    attention_mask [B, T]: 1 for real tokens, 0 for padding (never attended to, also later from the
    cache). segment_ids [B, T]: packed sequences attend only within their segment (0 = padding);
    training only, not combined with a cache. Positions are given explicitly so left padding and
    packing need no special cases. logits_at [B]: only the logits at that position of each row
    ([B, 1, V]): a prefill needs one position's, never [B, T, V] for a long prompt and vocabulary.
    subtree_ends [B, T]: sequences packed as prefix trees (`rl.batch`), in place of segment_ids.
    """
    x, cache = self.hidden_states(tokens, positions, cache, attention_mask, segment_ids,
                                  subtree_ends)
    if logits_at is not None:
      x = jnp.take_along_axis(x, logits_at[:, None, None], axis=1)
    return self.unembed(x), cache

  def hidden_states(self, tokens: jax.Array, positions: jax.Array, cache: KVCache | None = None,
                    attention_mask: jax.Array | None = None,
                    segment_ids: jax.Array | None = None,
                    subtree_ends: jax.Array | None = None) -> tuple[jax.Array, KVCache | None]:
    """The last decoder layer's output [B, T, E] (before the final norm) and the updated cache:
    `unembed` of it gives the logits, so a loss can take them a few positions at a time."""
    mask, slots, cache = attention_mask_for(tokens.shape, cache, attention_mask, segment_ids,
                                            subtree_ends)
    x = self.embed(tokens)
    step = self.layer_step
    new_keys, new_values = [], []
    for i, layer in enumerate(self.layers):
      kv = None if cache is None else (cache.keys[i], cache.values[i])
      x, kv = step(layer, x, positions, mask, kv, slots)
      if kv is not None:
        new_keys.append(kv[0])
        new_values.append(kv[1])
    if cache is not None:
      cache = cache.replace(keys=tuple(new_keys), values=tuple(new_values))
    return x, cache

  def embed(self, tokens: jax.Array) -> jax.Array:
    # Gather the table over fsdp first (as FSDP does for every weight): a gather from a table split
    # on both axes makes XLA replicate it in an unplanned way.
    table = constrain(self.embedding[...], ("vocab", None))
    x = jnp.take(table, tokens, axis=0).astype(jnp.dtype(self.config.dtype))
    return constrain(x, ("batch", "seq", "act_embed"))

  @property
  def layer_step(self):
    """`(layer, x, positions, mask, kv, slots) -> (x, kv)`, rematerialised as configured."""
    if self.config.remat == "none":
      return _layer_step
    return _rematerialised_layer_step(REMAT[self.config.remat])

  def unembed(self, x: jax.Array) -> jax.Array:
    """Final norm and output projection (the embedding when tied) to float32 logits."""
    x = self.final_norm(x)
    if self.lm_head is None:  # the embedding table is [vocab, embed]: [out, in]
      weight, layout = self.embedding[...], "out_in"
    else:
      weight, layout = self.lm_head[...], self.config.weight_layout
    logits = project(x, weight, layout, preferred_element_type=jnp.float32)
    return constrain(logits, ("batch", "seq", "act_vocab"))


def attention_mask_for(shape: tuple[int, int], cache: KVCache | None, attention_mask, segment_ids,
                       subtree_ends=None):
  """Which keys each query may see [B, T, S], the cache slots written, and the advanced cache.

  With `subtree_ends` a row holds prefix trees laid out depth first: every token is followed by
  its subtree, which ends at column subtree_ends[k] (-1: padding), so a query q sees exactly its
  ancestors and itself, the keys k <= q whose subtree reaches q: each sequence through the tree
  sees what it would see alone."""
  if subtree_ends is not None:
    if cache is not None or segment_ids is not None:
      raise ValueError("subtree_ends (packed prefix trees) replaces segment_ids and takes no cache")
    idx = jnp.arange(shape[1])
    mask = (idx[None, None, :] <= idx[None, :, None]) & (idx[None, :, None] <= subtree_ends[:, None, :])
    return mask, None, None
  if attention_mask is None:
    attention_mask = jnp.ones(shape, jnp.int32)
  if cache is None:
    seg = attention_mask.astype(jnp.int32) if segment_ids is None else segment_ids
    idx = jnp.arange(shape[1])
    mask = ((seg[:, :, None] == seg[:, None, :]) & (seg[:, None, :] != 0)
            & (idx[None, :, None] >= idx[None, None, :]))
    return mask, None, None
  if segment_ids is not None:
    raise ValueError("segment_ids (packed sequences) cannot be combined with a KV cache")
  slots = cache.write_slots(shape[1])
  cache = cache.advance(attention_mask)
  mask = cache.valid[:, None, :] & (jnp.arange(cache.max_length)[None, None, :] <= slots[:, :, None])
  return mask, slots, cache


def create_model(config: ModelConfig, *, mesh: Mesh | None = None, seed: int = 0) -> Qwen3:
  """Randomly initialised model; with a mesh, each parameter is created directly as its shards."""
  build = nnx.jit(lambda: Qwen3(config, rngs=nnx.Rngs(seed)))
  if mesh is None:
    return build()
  with jax.set_mesh(mesh):
    return build()


def abstract_model(config: ModelConfig, *, mesh: Mesh | None = None) -> Qwen3:
  """Shapes, dtypes and shardings of the model without allocating any weights."""
  build = lambda: Qwen3(config, rngs=nnx.Rngs(0))
  if mesh is None:
    return nnx.eval_shape(build)
  with jax.set_mesh(mesh):
    return nnx.as_abstract(nnx.eval_shape(build))


def shard_model(model: Qwen3, mesh: Mesh) -> Qwen3:
  """A copy of `model` laid out on `mesh` by its parameters' logical axes (e.g. train -> serve)."""
  graphdef, state = nnx.split(model)
  with jax.set_mesh(mesh):
    shardings = jax.tree.map(
        lambda v: NamedSharding(mesh, logical_to_spec(v.get_metadata()["logical_axes"], v.shape)),
        state, is_leaf=lambda x: isinstance(x, nnx.Variable))
  return nnx.merge(graphdef, transfer(state, shardings))
