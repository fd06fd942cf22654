"""A JetStream 0.2.2 `Engine` for the Qwen3 model: batched prefill, slot insert, multi-step decode.

JetStream's driver runs it: a prefill thread calls `prefill_batch` on the prompts waiting (our
driver; JetStream's own calls `prefill` with one), the generate thread `insert`s each prefix into a
free slot and calls `generate` for all slots at once, and a detokenize thread hands each slot's
tokens to its request. As in JetStream 0.2.2, a prefill returns only the prefix and the logits of
its last position; the first new token is sampled in `generate`.

Speed: prompts waiting together are prefilled in one call per length bucket; `generate` runs
`decode_steps` steps in one on-device loop that stops each sequence at its stop token, its
`max_tokens` or a full cache (the host sees the same stops in `process_result_tokens`), and leaves
early once every slot is done; decode attends only over the used part of the cache (a power-of-two
bucket above the longest live row, known on the host from `SlotLedger`). A finished sequence's row
stays in its slot until the slot is reused, then moves to the prefix store (`prefix_store_rows`),
and a prompt that extends it (the next turn of an episode) is prefilled only from where the two
differ (`reuse_prefixes`).

The engine serves the weights in `EngineConfig.weight_layout` (the model's own arrays, or a copy
permuted to [out, in], faster on some CPUs; see `model/layout.py`) and takes updates in the layout
of the model it was built from. Weights can be swapped while the driver runs (`update_params`);
every token records the policy version of the forward pass that produced its logits. The engine
never raises into the driver: a bad request is turned into an error prefix that fails only that
request.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import zlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, struct
from jax.sharding import Mesh

from toolorch_jax.model import KVCache, Qwen3, shard_model
from toolorch_jax.model.layout import relayout, relayout_state
from toolorch_jax.model.sharding import transfer, within
from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.engine_config import EngineConfig
from toolorch_jax.serving.sampling import SamplingParams, sample_tokens
from toolorch_jax.serving.slot_ledger import Reuse, SlotLedger
from toolorch_jax.tokenizer import Tokenizer

logger = logging.getLogger("toolorch_jax.serving")

NO_LIMIT = 2**30  # max_tokens of a request that gave none: the cache's room ends it


@dataclasses.dataclass
class PrefillInput:
  """What the driver hands to the engine: the prompt ids, the request's sampling settings and
  token limit (enforced on the device; None: until a stop token or a full cache)."""

  ids: np.ndarray
  sampling: SamplingParams | None = None
  max_tokens: int | None = None


@dataclasses.dataclass
class Prefix:
  """Result of a prefill; `error` is set instead of arrays when the request was rejected.

  Prompts prefilled together share one cache and logits array; this one's is row `row`. With
  `reuse` set nothing was computed yet: `insert` extends that slot's row by the rest of `ids`.
  """

  ids: np.ndarray | None = None
  cache: KVCache | None = None  # [batch, bucket]
  logits: jax.Array | None = None  # [batch, V] float32 for the first generated token
  row: int = 0
  version: int = 0
  sampling: SamplingParams = SamplingParams()
  seed: int = 0
  max_tokens: int = NO_LIMIT
  reuse: Reuse | None = None
  error: str | None = None


@dataclasses.dataclass
class EngineStats:
  """Counts since the engine started (host-side, exact): what was computed and what reused."""

  prefill_calls: int = 0
  prefilled_tokens: int = 0  # prompt tokens run through the model by a prefill (padding excluded)
  reused_tokens: int = 0  # prompt tokens whose KV came from a previous sequence's row
  evicted_reuses: int = 0  # planned reuses whose row was overwritten first (full prefill instead)
  generate_restarts: int = 0  # JetStream generate loops started again after its slot race
  decode_dispatches: int = 0

  def __post_init__(self):
    self._lock = threading.Lock()  # the prefill and generate threads both count

  def add(self, **counts: int) -> None:
    with self._lock:
      for name, count in counts.items():
        setattr(self, name, getattr(self, name) + count)


@struct.dataclass
class DecodeState:
  cache: KVCache  # [slots, max_cache_length]
  logits: jax.Array  # [slots, V] float32: where each slot's next token is sampled from
  logits_version: jax.Array  # [slots] policy version that computed `logits`
  positions: jax.Array  # [slots] position of the next token fed to the model
  generated: jax.Array  # [slots] tokens generated so far
  max_tokens: jax.Array  # [slots] the request's limit on generated tokens
  temperature: jax.Array  # [slots]
  top_k: jax.Array  # [slots]
  top_p: jax.Array  # [slots]
  keys: jax.Array  # [slots, 2] raw PRNG key data
  status: jax.Array  # [slots] STATUS_OK or STATUS_ERROR
  done: jax.Array  # [slots] bool: nothing decodes in this slot (free, finished or failed)
  store: KVCache | None  # [prefix_store_rows, max_cache_length] finished sequences kept for reuse


LIVE_PARAMS = "live"  # what `load_params` returns: use the engine's current weights


def next_power_of_two(length: int, smallest: int, largest: int) -> int:
  size = smallest
  while size < length:
    size *= 2
  return min(size, largest)


def bucket_length(length: int, config: EngineConfig) -> int:
  return next_power_of_two(length, config.min_prefill_bucket, config.max_prefill_length)


class EngineTokenizer(js.tokenizer_api.Tokenizer):
  """JetStream's tokenizer interface over a project tokenizer (no BOS: Qwen3 has none)."""

  def __init__(self, tokenizer: Tokenizer, engine: "Engine"):
    self.tokenizer = tokenizer
    self._engine = engine

  def encode(self, s: str, **kwargs) -> tuple[np.ndarray, int]:
    ids = np.asarray(self.tokenizer.encode(s), np.int32)
    return ids, len(ids)

  def decode(self, token_ids, **kwargs) -> str:
    return self.tokenizer.decode(list(token_ids))

  @property
  def pad_id(self) -> int:
    return self.tokenizer.pad_id

  @property
  def eos_id(self) -> int:
    return self.tokenizer.eos_id

  @property
  def bos_id(self) -> int:
    return self.tokenizer.pad_id

  @property
  def stop_tokens(self) -> set[int]:
    return set(self.tokenizer.stop_ids)

  def slot_error(self, slot: int) -> str | None:
    return self._engine.slot_error(slot)

  def slot_tokens(self, slot: int, token_ids: Sequence[int], finish_reason: str | None) -> None:
    """The detokenizer's report of the tokens a slot fed to the model (see `SlotLedger`)."""
    self._engine.ledger.appended(slot, token_ids, finished=finish_reason is not None,
                                 frozen=finish_reason in ("stop", "length"))


class Engine(js.engine_api.Engine):
  """JetStream engine over a Qwen3 model on an optional mesh."""

  def __init__(self, model: Qwen3, tokenizer: Tokenizer, config: EngineConfig = EngineConfig(),
               mesh: Mesh | None = None, version: int = 0):
    self.config = config
    self._mesh = mesh
    if mesh is not None:
      model = shard_model(model, mesh)
    # Updates come in the trainer's layout: placed as these on the serving mesh, then permuted.
    source, self._update_treedef = jax.tree.flatten(nnx.state(model))
    self._update_shapes = [(a.shape, a.dtype, a.sharding) for a in source]
    source_layout, served_layout = model.config.weight_layout, config.served_layout(model.config)
    self._relayout_fn = None
    if served_layout != source_layout:
      model = relayout(model, served_layout, mesh)
      self._relayout_fn = jax.jit(lambda state: relayout_state(state, source_layout, served_layout),
                                  out_shardings=[a.sharding for a in jax.tree.leaves(nnx.state(model))])
    self.model_config = model.config
    self._graphdef, params = nnx.split(model)
    self._params_treedef = jax.tree.structure(params)
    self._live = (params, version)  # swapped as one tuple: readers never see a half update
    self._update_lock = threading.Lock()
    self._slot_errors: dict[int, str] = {}
    self._tokenizer = EngineTokenizer(tokenizer, self)
    self.vocab_limit = min(tokenizer.vocab_size, model.config.vocab_size)
    self.stop_ids = np.asarray(sorted(tokenizer.stop_ids), np.int32)
    self.ledger = SlotLedger(config.max_slots, config.prefix_store_rows, config.max_cache_length)
    self.stats = EngineStats()
    self._prefill_fn = jax.jit(self._prefill_impl)
    self._insert_fn = jax.jit(self._insert_impl, donate_argnums=(0,))
    self._extend_fn = jax.jit(self._extend_impl, donate_argnums=(1,), static_argnames=("from_store",))
    self._save_fn = jax.jit(self._save_impl, donate_argnums=(0,))
    self._mark_error_fn = jax.jit(self._mark_error_impl, donate_argnums=(0,))
    self._generate_fn = jax.jit(self._generate_impl, donate_argnums=(1,), static_argnames=("attend",))

  # ----- weights ---------------------------------------------------------------------------------

  @property
  def version(self) -> int:
    return self._live[1]

  def update_params(self, params: Any, version: int) -> None:
    """Serves `params` (an nnx.State or a Qwen3 in the layout of the model the engine was built
    from, as the trainer holds it) from the next prefill/decode dispatch.

    Weights from another mesh (e.g. the trainer's, spread over every host) are moved onto the
    serving mesh (`transfer`: device_put refuses arrays of several processes), then permuted into
    the served layout there.
    """
    if isinstance(params, Qwen3):
      params = nnx.state(params)
    leaves = jax.tree.leaves(params)
    if [(a.shape, a.dtype) for a in leaves] != [(s, d) for s, d, _ in self._update_shapes]:
      raise ValueError("update_params: the new weights do not match the served model's shapes/dtypes")
    placed = transfer(leaves, [sharding for _, _, sharding in self._update_shapes])
    if self._relayout_fn is not None:
      placed = self._relayout_fn(jax.tree.unflatten(self._update_treedef, placed))
    with self._update_lock:
      self._live = (jax.tree.unflatten(self._params_treedef, placed), int(version))
      self.ledger.new_weights()  # cached keys and values were computed with the old ones

  def _params(self, params: Any):
    return self._live if params is LIVE_PARAMS or params is None else (params, self.version)

  def _run(self, fn, *args, **kwargs):
    with within(self._mesh):
      return fn(*args, **kwargs)

  # ----- jitted programs -------------------------------------------------------------------------

  def _prefill_impl(self, params, tokens, true_lengths):
    """tokens [B, T] right-padded, true_lengths [B] -> (cache [B, T], last logits [B, V]).

    One program for the batch, but the prompts run one after another (`lax.map`): a prompt's
    numbers must not depend on which others arrived with it (a batched matmul rounds differently
    for other batch sizes), or a rerun would sample differently.
    """
    model = nnx.merge(self._graphdef, params)
    length = tokens.shape[1]
    cfg = self.model_config

    def one(row):
      ids, true_length = row
      cache = KVCache.zeros(cfg.num_layers, 1, length, cfg.num_kv_heads, cfg.head_dim,
                            jnp.dtype(cfg.dtype))
      mask = (jnp.arange(length) < true_length)[None, :].astype(jnp.int32)
      logits, cache = model(ids[None], jnp.arange(length, dtype=jnp.int32)[None, :], cache,
                            attention_mask=mask, logits_at=jnp.reshape(true_length - 1, (1,)))
      return jax.tree.map(lambda a: a[0], cache), logits[0, 0]

    return jax.lax.map(one, (tokens, true_lengths))

  @staticmethod
  def _start(state: DecodeState, cache: KVCache, slot, logits, length, version, temperature, top_k,
             top_p, key, max_tokens) -> DecodeState:
    """`state` with slot `slot` decoding from `cache`'s row there, `length` tokens long."""
    return state.replace(
        cache=cache.replace(lengths=cache.lengths.at[slot].set(length)),
        logits=state.logits.at[slot].set(logits),
        logits_version=state.logits_version.at[slot].set(version),
        positions=state.positions.at[slot].set(length), generated=state.generated.at[slot].set(0),
        max_tokens=state.max_tokens.at[slot].set(max_tokens),
        temperature=state.temperature.at[slot].set(temperature),
        top_k=state.top_k.at[slot].set(top_k), top_p=state.top_p.at[slot].set(top_p),
        keys=state.keys.at[slot].set(key), status=state.status.at[slot].set(js.STATUS_OK),
        done=state.done.at[slot].set(False))

  @staticmethod
  def _put_row(cache: KVCache, row: KVCache, valid_row, slot) -> KVCache:
    """`cache` with `row` ([1, P] keys and values, P <= the cache's length) written into `slot`."""
    def put(dst, src):
      return jax.lax.dynamic_update_slice(dst, src.astype(dst.dtype), (slot,) + (0,) * (dst.ndim - 1))

    return cache.replace(keys=tuple(put(d, s) for d, s in zip(cache.keys, row.keys)),
                         values=tuple(put(d, s) for d, s in zip(cache.values, row.values)),
                         valid=put(cache.valid, valid_row))

  def _insert_impl(self, state: DecodeState, prefix: KVCache, logits, row, length, version,
                   temperature, top_k, top_p, key, max_tokens, slot):
    take = lambda a: jax.lax.dynamic_index_in_dim(a, row, 0, keepdims=True)
    source = prefix.replace(keys=tuple(map(take, prefix.keys)), values=tuple(map(take, prefix.values)))
    valid_row = jax.lax.dynamic_update_slice(jnp.zeros((1, state.cache.max_length), bool),
                                             take(prefix.valid), (0, 0))
    cache = self._put_row(state.cache, source, valid_row, slot)
    return self._start(state, cache, slot, logits[row], length, version, temperature, top_k, top_p,
                       key, max_tokens)

  def _extend_impl(self, params, state: DecodeState, source, reused, tokens, true_length,
                   version, temperature, top_k, top_p, key, max_tokens, slot, *, from_store: bool):
    """Prefills `tokens` [1, T] (true_length real) after the first `reused` tokens of row `source`
    of the slots (which may be `slot` itself) or of the store, into `slot`."""
    take = lambda a: jax.lax.dynamic_index_in_dim(a, source, 0, keepdims=True)
    full = state.cache
    held = state.store if from_store else full
    row = KVCache(keys=tuple(map(take, held.keys)), values=tuple(map(take, held.values)),
                  valid=take(held.valid) & (jnp.arange(full.max_length) < reused)[None, :],
                  lengths=jnp.reshape(reused, (1,)).astype(jnp.int32))
    model = nnx.merge(self._graphdef, params)
    length = tokens.shape[1]
    positions = reused + jnp.arange(length, dtype=jnp.int32)[None, :]
    mask = (jnp.arange(length) < true_length)[None, :].astype(jnp.int32)
    logits, row = model(tokens, positions, row, attention_mask=mask,
                        logits_at=jnp.reshape(true_length - 1, (1,)))
    cache = self._put_row(full, row, row.valid, slot)
    return self._start(state, cache, slot, logits[0, 0], reused + true_length, version, temperature,
                       top_k, top_p, key, max_tokens)

  def _save_impl(self, state: DecodeState, slot, store_row):
    """Copies slot `slot`'s row into row `store_row` of the store."""
    take = lambda a: jax.lax.dynamic_index_in_dim(a, slot, 0, keepdims=True)
    row = state.cache.replace(keys=tuple(map(take, state.cache.keys)),
                              values=tuple(map(take, state.cache.values)))
    return state.replace(store=self._put_row(state.store, row, take(state.cache.valid), store_row))

  def _mark_error_impl(self, state: DecodeState, slot):
    return state.replace(status=state.status.at[slot].set(js.STATUS_ERROR),
                         generated=state.generated.at[slot].set(0), done=state.done.at[slot].set(True))

  def _generate_impl(self, params, state: DecodeState, version, *, attend: int):
    """Up to `decode_steps` steps for every slot not done, attending over the first `attend`
    cache positions; data [slots, steps, 6] (see jetstream_compat's columns)."""
    model = nnx.merge(self._graphdef, params)
    full = state.cache
    capacity, steps = full.max_length, self.config.decode_steps
    cache = full.replace(keys=tuple(k[:, :attend] for k in full.keys),
                         values=tuple(v[:, :attend] for v in full.values), valid=full.valid[:, :attend])
    data = jnp.zeros((self.config.max_slots, steps, 6), jnp.int32)
    data = data.at[:, :, js.COL_STATUS].set(state.status[:, None])
    vocab_ok = jnp.arange(state.logits.shape[-1]) < self.vocab_limit
    stop_ids = jnp.asarray(self.stop_ids)

    def step(carry):
      i, s, cache, data = carry
      live = ~s.done
      # An embedding padded past the tokenizer (Qwen3's is) never yields an id it cannot decode.
      logits = jnp.where(vocab_ok, s.logits, -jnp.inf)
      tokens, logprobs, keys = sample_tokens(logits, s.temperature, s.top_k, s.top_p, s.keys)
      cache_full = cache.lengths >= capacity  # this token cannot be stored
      new_logits, new_cache = model(tokens[:, None], s.positions[:, None], cache,
                                    attention_mask=live[:, None].astype(jnp.int32))
      new_cache = new_cache.replace(lengths=jnp.where(live, new_cache.lengths, cache.lengths))
      generated = s.generated + live
      status = jnp.where(s.status == js.STATUS_ERROR, js.STATUS_ERROR,
                         jnp.where(cache_full, js.STATUS_CACHE_FULL, js.STATUS_OK))
      row = jnp.stack([tokens, live.astype(jnp.int32), generated, s.logits_version,
                       jax.lax.bitcast_convert_type(logprobs, jnp.int32), status], axis=1)
      data = jax.lax.dynamic_update_index_in_dim(data, row.astype(jnp.int32), i, axis=1)
      stopped = jnp.isin(tokens, stop_ids) | (generated >= s.max_tokens) | cache_full
      s = s.replace(
          logits=jnp.where(live[:, None], new_logits[:, 0], s.logits),
          logits_version=jnp.where(live, version, s.logits_version),
          positions=s.positions + live, generated=generated,
          keys=jnp.where(live[:, None], keys, s.keys), done=s.done | stopped)
      return i + 1, s, new_cache, data

    def more(carry):
      i, s, _, _ = carry
      return (i < steps) & jnp.any(~s.done)

    store = state.store
    carry = (jnp.int32(0), state.replace(cache=None, store=None), cache, data)  # caches stay out
    _, state, cache, data = jax.lax.while_loop(more, step, carry)
    put = lambda dst, src: jax.lax.dynamic_update_slice(dst, src, (0,) * dst.ndim)
    full = full.replace(keys=tuple(map(put, full.keys, cache.keys)),
                        values=tuple(map(put, full.values, cache.values)),
                        valid=put(full.valid, cache.valid), lengths=cache.lengths)
    return state.replace(cache=full, store=store), data

  # ----- JetStream Engine API --------------------------------------------------------------------

  def check_request(self, ids: Sequence[int]) -> str | None:
    """Why a prompt cannot be served, or None."""
    if len(ids) == 0:
      return "the prompt is empty"
    if len(ids) > self.config.max_prefill_length:
      return (f"the prompt has {len(ids)} tokens; this engine accepts at most"
              f" {self.config.max_prefill_length} (max_prefill_length)")
    bad = [int(i) for i in ids if not 0 <= int(i) < self.vocab_limit]
    if bad:
      return f"token ids {bad[:5]} are outside the vocabulary [0, {self.vocab_limit})"
    return None

  def _accept(self, request: PrefillInput, params) -> Prefix:
    """A validated prefix with nothing computed yet, or an error prefix."""
    sampling = request.sampling or self.config.default_sampling
    try:
      ids = np.asarray(request.ids, np.int64).reshape(-1)
      problem = self.check_request(ids)
      if problem:
        raise ValueError(problem)
      sampling.validate()
      seed = sampling.seed if sampling.seed is not None else zlib.crc32(ids.tobytes())
      limit = NO_LIMIT if request.max_tokens is None else int(request.max_tokens)
      prefix = Prefix(ids=ids.astype(np.int32), version=self._params(params)[1], sampling=sampling,
                      seed=seed, max_tokens=limit)
      if self.config.reuse_prefixes:
        prefix.reuse = self.ledger.longest_prefix(prefix.ids, self.config.min_prefill_bucket)
      return prefix
    except Exception as err:  # pylint: disable=broad-exception-caught
      logger.warning("prefill rejected a request: %s", err)
      return Prefix(error=f"{type(err).__name__}: {err}" if not isinstance(err, ValueError) else str(err))

  def _rows_per_call(self, bucket: int) -> int:
    return max(1, min(self.config.prefill_batch, self.config.prefill_batch_tokens // bucket))

  def _compute(self, prefixes: list[Prefix], params) -> None:
    """Prefills `prefixes` (same length bucket) in one call; fills in their cache and logits."""
    bucket = bucket_length(max(len(p.ids) for p in prefixes), self.config)
    rows = next_power_of_two(len(prefixes), 1, self._rows_per_call(bucket))  # few compiled shapes
    tokens = np.full((rows, bucket), self._tokenizer.pad_id, np.int32)
    lengths = np.ones((rows,), np.int32)
    for i, prefix in enumerate(prefixes):
      tokens[i, :len(prefix.ids)] = prefix.ids
      lengths[i] = len(prefix.ids)
    params, version = self._params(params)
    cache, logits = self._run(self._prefill_fn, params, jnp.asarray(tokens), jnp.asarray(lengths))
    self.stats.add(prefill_calls=1, prefilled_tokens=int(sum(len(p.ids) for p in prefixes)))
    for i, prefix in enumerate(prefixes):
      prefix.cache, prefix.logits, prefix.row, prefix.version = cache, logits, i, version

  def prefill_batch(self, requests: Sequence[PrefillInput], params=LIVE_PARAMS) -> list[Prefix]:
    """One prefix per request: errors for bad ones, a planned reuse where a slot's row extends,
    and the rest prefilled together: calls per length bucket of at most `prefill_batch` prompts
    and `prefill_batch_tokens` padded tokens."""
    prefixes = [self._accept(r, params) for r in requests]
    waiting: dict[int, list[Prefix]] = {}
    for prefix in prefixes:
      if prefix.error is None and prefix.reuse is None:
        waiting.setdefault(bucket_length(len(prefix.ids), self.config), []).append(prefix)
    for bucket, group in waiting.items():
      per_call = self._rows_per_call(bucket)
      for start in range(0, len(group), per_call):
        chunk = group[start:start + per_call]
        try:
          self._compute(chunk, params)
        except Exception as err:  # pylint: disable=broad-exception-caught
          logger.warning("prefill failed: %s", err)
          for prefix in chunk:
            prefix.error = f"prefill failed: {err}"
    return prefixes

  def prefill(self, *, params, existing_prefix=None, padded_tokens, true_length: int) -> Prefix:
    """JetStream's one-request prefill (our driver calls `prefill_batch`)."""
    if existing_prefix is not None:
      return Prefix(error="prefix caching (existing_prefix) is not supported")
    request = padded_tokens if isinstance(padded_tokens, PrefillInput) else PrefillInput(
        np.asarray(padded_tokens)[:true_length])
    return self.prefill_batch([request], params)[0]

  def insert(self, prefix: Prefix, decode_state: DecodeState, slot: int) -> DecodeState:
    try:
      if prefix.error is None:
        if prefix.reuse is not None and not self.ledger.take(prefix.reuse):
          self.stats.add(evicted_reuses=1)  # the row was overwritten meanwhile: look again
          prefix.reuse = self.ledger.longest_prefix(prefix.ids, self.config.min_prefill_bucket)
          if prefix.reuse is None or not self.ledger.take(prefix.reuse):
            prefix.reuse = None
            self._compute([prefix], LIVE_PARAMS)
        decode_state = self._keep_finished(decode_state, slot, prefix.reuse)
        s = prefix.sampling
        key = jax.random.key_data(jax.random.PRNGKey(prefix.seed))
        settings = (jnp.float32(s.temperature), jnp.int32(s.top_k), jnp.float32(s.top_p), key,
                    jnp.int32(prefix.max_tokens), jnp.int32(slot))
        if prefix.reuse is None:
          state = self._run(self._insert_fn, decode_state, prefix.cache, prefix.logits,
                            jnp.int32(prefix.row), jnp.int32(len(prefix.ids)),
                            jnp.int32(prefix.version), *settings)
        else:
          state = self._extend(prefix, decode_state, settings)
        self.ledger.inserted(slot, prefix.ids)
        self._slot_errors.pop(slot, None)
        return state
    except Exception as err:  # pylint: disable=broad-exception-caught
      logger.warning("insert failed: %s", err)
      prefix = dataclasses.replace(prefix, error=f"insert failed: {err}")
    self._slot_errors[slot] = prefix.error
    self.ledger.cleared(slot)
    return self._run(self._mark_error_fn, decode_state, jnp.int32(slot))

  def _keep_finished(self, decode_state: DecodeState, slot: int, reuse: Reuse | None) -> DecodeState:
    """Moves the finished sequence in `slot` (about to be overwritten) to the prefix store."""
    target = self.ledger.save_target(slot, self.config.min_prefill_bucket,
                                     keep=None if reuse is None else reuse.row)
    if target is None:
      return decode_state
    return self._run(self._save_fn, decode_state, jnp.int32(slot),
                     jnp.int32(target - self.config.max_slots))

  def _extend(self, prefix: Prefix, decode_state: DecodeState, settings) -> DecodeState:
    reused, source = prefix.reuse.length, prefix.reuse.row
    rest = prefix.ids[reused:]
    tokens = np.full((1, bucket_length(len(rest), self.config)), self._tokenizer.pad_id, np.int32)
    tokens[0, :len(rest)] = rest
    params, version = self._params(LIVE_PARAMS)
    from_store = self.ledger.in_store(source)
    source -= self.config.max_slots if from_store else 0
    state = self._run(self._extend_fn, params, decode_state, jnp.int32(source), jnp.int32(reused),
                      jnp.asarray(tokens), jnp.int32(len(rest)), jnp.int32(version), *settings,
                      from_store=from_store)
    self.stats.add(prefill_calls=1, prefilled_tokens=len(rest), reused_tokens=reused)
    return state

  def slot_error(self, slot: int) -> str | None:
    return self._slot_errors.get(slot)

  def generate(self, params, decode_state: DecodeState):
    params, version = self._params(params)
    steps = self.config.decode_steps
    attend = next_power_of_two(self.ledger.dispatched(steps), self.config.min_attention_length,
                               self.config.max_cache_length)
    try:
      decode_state, data = self._run(self._generate_fn, params, decode_state, jnp.int32(version),
                                     attend=attend)
      self.stats.add(decode_dispatches=1)
    except Exception as err:  # pylint: disable=broad-exception-caught
      # Nothing can be trusted in a step that failed: fail every live request, keep serving.
      logger.error("generate step failed: %s", err)
      for slot in range(self.config.max_slots):
        self._slot_errors[slot] = f"decode step failed: {err}"
      decode_state = self.init_decode_state()
      data = np.zeros((self.config.max_slots, steps, 6), np.int32)
      data[:, :, js.COL_STATUS] = js.STATUS_ERROR
    return decode_state, js.engine_api.ResultTokens(
        data=data, tokens_idx=(0, 1), valid_idx=(1, 2), length_idx=(2, 3), samples_per_slot=1)

  def init_decode_state(self, *args, **kwargs) -> DecodeState:
    """An empty cache: no row holds a sequence any more, so none may be reused."""
    self.ledger.forget()
    slots, cfg = self.config.max_slots, self.model_config

    def build():
      return DecodeState(
          cache=KVCache.zeros(cfg.num_layers, slots, self.config.max_cache_length, cfg.num_kv_heads,
                              cfg.head_dim, jnp.dtype(cfg.dtype)),
          logits=jnp.zeros((slots, cfg.vocab_size), jnp.float32),
          logits_version=jnp.zeros((slots,), jnp.int32),
          positions=jnp.zeros((slots,), jnp.int32), generated=jnp.zeros((slots,), jnp.int32),
          max_tokens=jnp.zeros((slots,), jnp.int32),
          temperature=jnp.zeros((slots,), jnp.float32), top_k=jnp.zeros((slots,), jnp.int32),
          top_p=jnp.ones((slots,), jnp.float32), keys=jnp.zeros((slots, 2), jnp.uint32),
          status=jnp.zeros((slots,), jnp.int32), done=jnp.ones((slots,), bool),
          store=None if not self.config.prefix_store_rows else KVCache.zeros(
              cfg.num_layers, self.config.prefix_store_rows, self.config.max_cache_length,
              cfg.num_kv_heads, cfg.head_dim, jnp.dtype(cfg.dtype)))

    return self._run(jax.jit(build))

  def load_params(self, *args, **kwargs):
    return LIVE_PARAMS

  def get_prefix_destination_sharding(self) -> Any:
    return None

  def get_tokenizer(self):
    return js.tokenizer_pb2.TokenizerParameters(path=getattr(self._tokenizer.tokenizer, "source", ""))

  def build_tokenizer(self, metadata) -> EngineTokenizer:
    return self._tokenizer

  @property
  def max_concurrent_decodes(self) -> int:
    return self.config.max_slots

  @property
  def samples_per_slot(self) -> int:
    return 1

  @property
  def max_prefill_length(self) -> int:
    return self.config.max_prefill_length

  @property
  def mesh(self) -> Mesh | None:
    return self._mesh

  @property
  def colocated_cpus(self):
    return None
