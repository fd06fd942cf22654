"""A JetStream 0.2.2 `Engine` for the Qwen3 model: bucketed prefill, slot insert, batched decode.

JetStream's driver runs it: a prefill thread calls `prefill`, the generate thread `insert`s the
prefix into a free slot and calls `generate` for all slots at once, and a detokenize thread hands
each slot's tokens to its request. As in JetStream 0.2.2, `prefill` returns only the prefix and the
logits of its last position; the first new token is sampled in `generate`.

Weights can be swapped while the driver runs (`update_params`); every token records the policy
version of the forward pass that produced its logits. The engine never raises into the driver: a
bad request is turned into an error prefix that fails only that request.
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
from toolorch_jax.model.sharding import transfer, within
from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.serving.engine_config import EngineConfig
from toolorch_jax.serving.sampling import SamplingParams, sample_tokens
from toolorch_jax.tokenizer import Tokenizer

logger = logging.getLogger("toolorch_jax.serving")


@dataclasses.dataclass
class PrefillInput:
  """What the driver hands to `prefill`: the prompt ids and the request's sampling settings."""

  ids: np.ndarray
  sampling: SamplingParams | None = None


@dataclasses.dataclass
class Prefix:
  """Result of a prefill; `error` is set instead of arrays when the request was rejected."""

  cache: KVCache | None = None
  logits: jax.Array | None = None  # [V] float32 for the first generated token
  true_length: int = 0
  version: int = 0
  sampling: SamplingParams = SamplingParams()
  seed: int = 0
  error: str | None = None


@struct.dataclass
class DecodeState:
  cache: KVCache  # [slots, max_cache_length]
  logits: jax.Array  # [slots, V] float32: where each slot's next token is sampled from
  logits_version: jax.Array  # [slots] policy version that computed `logits`
  positions: jax.Array  # [slots] position of the next token fed to the model
  generated: jax.Array  # [slots] tokens generated so far
  temperature: jax.Array  # [slots]
  top_k: jax.Array  # [slots]
  top_p: jax.Array  # [slots]
  keys: jax.Array  # [slots, 2] raw PRNG key data
  status: jax.Array  # [slots] STATUS_OK or STATUS_ERROR


LIVE_PARAMS = "live"  # what `load_params` returns: use the engine's current weights


def bucket_length(length: int, config: EngineConfig) -> int:
  bucket = config.min_prefill_bucket
  while bucket < length:
    bucket *= 2
  return min(bucket, config.max_prefill_length)


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


class Engine(js.engine_api.Engine):
  """JetStream engine over a Qwen3 model on an optional mesh."""

  def __init__(self, model: Qwen3, tokenizer: Tokenizer, config: EngineConfig = EngineConfig(),
               mesh: Mesh | None = None, version: int = 0):
    self.config = config
    self.model_config = model.config
    self._mesh = mesh
    if mesh is not None:
      model = shard_model(model, mesh)
    self._graphdef, params = nnx.split(model)
    leaves, self._params_treedef = jax.tree.flatten(params)
    self._param_layout = [(a.shape, a.dtype, a.sharding) for a in leaves]
    self._live = (params, version)  # swapped as one tuple: readers never see a half update
    self._update_lock = threading.Lock()
    self._slot_errors: dict[int, str] = {}
    self._tokenizer = EngineTokenizer(tokenizer, self)
    self.vocab_limit = min(tokenizer.vocab_size, model.config.vocab_size)
    self._prefill_fn = jax.jit(self._prefill_impl)
    self._insert_fn = jax.jit(self._insert_impl, donate_argnums=(0,))
    self._mark_error_fn = jax.jit(self._mark_error_impl, donate_argnums=(0,))
    self._generate_fn = jax.jit(self._generate_impl, donate_argnums=(1,))

  # ----- weights ---------------------------------------------------------------------------------

  @property
  def version(self) -> int:
    return self._live[1]

  def update_params(self, params: Any, version: int) -> None:
    """Serves `params` (an nnx.State of the model or a Qwen3) from the next prefill/decode step.

    Weights from another mesh (e.g. the trainer's, spread over every host) are moved onto the
    serving mesh (`transfer`: device_put refuses arrays of several processes).
    """
    if isinstance(params, Qwen3):
      params = nnx.state(params)
    leaves = jax.tree.leaves(params)
    if [(a.shape, a.dtype) for a in leaves] != [(s, d) for s, d, _ in self._param_layout]:
      raise ValueError("update_params: the new weights do not match the served model's shapes/dtypes")
    with self._update_lock:
      placed = transfer(leaves, [sharding for _, _, sharding in self._param_layout])
      self._live = (jax.tree.unflatten(self._params_treedef, placed), int(version))

  def _params(self, params: Any):
    return self._live if params is LIVE_PARAMS or params is None else (params, self.version)

  def _run(self, fn, *args):
    with within(self._mesh):
      return fn(*args)

  # ----- jitted programs -------------------------------------------------------------------------

  def _prefill_impl(self, params, tokens, true_length):
    model = nnx.merge(self._graphdef, params)
    length = tokens.shape[1]
    mask = (jnp.arange(length) < true_length)[None, :]
    cache = KVCache.zeros(self.model_config.num_layers, 1, length, self.model_config.num_kv_heads,
                          self.model_config.head_dim, jnp.dtype(self.model_config.dtype))
    positions = jnp.arange(length, dtype=jnp.int32)[None, :]
    logits, cache = model(tokens, positions, cache, attention_mask=mask.astype(jnp.int32))
    return cache, logits[0, true_length - 1]

  def _insert_impl(self, state: DecodeState, cache: KVCache, logits, true_length, version,
                   temperature, top_k, top_p, key, slot):
    def put_row(dst, src):  # src [1, P, ...] into row `slot`, columns [0, P)
      return jax.lax.dynamic_update_slice(dst, src.astype(dst.dtype), (slot,) + (0,) * (dst.ndim - 1))

    valid_row = jnp.zeros((1, state.cache.max_length), bool)
    valid_row = jax.lax.dynamic_update_slice(valid_row, cache.valid, (0, 0))
    new_cache = state.cache.replace(
        keys=tuple(put_row(d, s) for d, s in zip(state.cache.keys, cache.keys)),
        values=tuple(put_row(d, s) for d, s in zip(state.cache.values, cache.values)),
        valid=put_row(state.cache.valid, valid_row),
        lengths=state.cache.lengths.at[slot].set(true_length))
    return state.replace(
        cache=new_cache, logits=state.logits.at[slot].set(logits),
        logits_version=state.logits_version.at[slot].set(version),
        positions=state.positions.at[slot].set(true_length),
        generated=state.generated.at[slot].set(0),
        temperature=state.temperature.at[slot].set(temperature),
        top_k=state.top_k.at[slot].set(top_k), top_p=state.top_p.at[slot].set(top_p),
        keys=state.keys.at[slot].set(key), status=state.status.at[slot].set(js.STATUS_OK))

  def _mark_error_impl(self, state: DecodeState, slot):
    return state.replace(status=state.status.at[slot].set(js.STATUS_ERROR),
                         generated=state.generated.at[slot].set(0))

  def _generate_impl(self, params, state: DecodeState, version):
    logits = state.logits
    if self.vocab_limit < logits.shape[-1]:  # an embedding padded past the tokenizer (Qwen3's is)
      logits = jnp.where(jnp.arange(logits.shape[-1]) < self.vocab_limit, logits, -jnp.inf)
    tokens, logprobs, keys = sample_tokens(logits, state.temperature, state.top_k, state.top_p,
                                           state.keys)
    cache_full = state.cache.lengths >= state.cache.max_length  # this token cannot be stored
    model = nnx.merge(self._graphdef, params)
    logits, cache = model(tokens[:, None], state.positions[:, None], state.cache)
    generated = state.generated + 1
    status = jnp.where(state.status == js.STATUS_ERROR, js.STATUS_ERROR,
                       jnp.where(cache_full, js.STATUS_CACHE_FULL, js.STATUS_OK))
    data = jnp.stack([tokens, jnp.ones_like(tokens), generated,
                      state.logits_version, jax.lax.bitcast_convert_type(logprobs, jnp.int32),
                      status], axis=1).astype(jnp.int32)
    new_state = state.replace(
        cache=cache, logits=logits[:, 0], logits_version=jnp.full_like(state.logits_version, version),
        positions=state.positions + 1, generated=generated, keys=keys)
    return new_state, data

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

  def prefill(self, *, params, existing_prefix=None, padded_tokens, true_length: int) -> Prefix:
    request = padded_tokens if isinstance(padded_tokens, PrefillInput) else PrefillInput(
        np.asarray(padded_tokens)[:true_length])
    sampling = request.sampling or self.config.default_sampling
    try:
      if existing_prefix is not None:
        raise ValueError("prefix caching (existing_prefix) is not supported")
      ids = np.asarray(request.ids, np.int64).reshape(-1)
      problem = self.check_request(ids)
      if problem:
        raise ValueError(problem)
      sampling.validate()
      bucket = bucket_length(len(ids), self.config)
      tokens = np.full((1, bucket), self._tokenizer.pad_id, np.int32)
      tokens[0, :len(ids)] = ids
      params, version = self._params(params)
      cache, logits = self._run(self._prefill_fn, params, jnp.asarray(tokens), jnp.int32(len(ids)))
      seed = sampling.seed if sampling.seed is not None else zlib.crc32(ids.tobytes())
      return Prefix(cache, logits, len(ids), version, sampling, seed)
    except Exception as err:  # pylint: disable=broad-exception-caught
      logger.warning("prefill rejected a request: %s", err)
      return Prefix(error=f"{type(err).__name__}: {err}" if not isinstance(err, ValueError) else str(err))

  def insert(self, prefix: Prefix, decode_state: DecodeState, slot: int) -> DecodeState:
    try:
      if prefix.error is None:
        s = prefix.sampling
        key = jax.random.key_data(jax.random.PRNGKey(prefix.seed))
        state = self._run(self._insert_fn, decode_state, prefix.cache, prefix.logits,
                          jnp.int32(prefix.true_length), jnp.int32(prefix.version),
                          jnp.float32(s.temperature), jnp.int32(s.top_k), jnp.float32(s.top_p),
                          key, jnp.int32(slot))
        self._slot_errors.pop(slot, None)
        return state
    except Exception as err:  # pylint: disable=broad-exception-caught
      logger.warning("insert failed: %s", err)
      prefix = dataclasses.replace(prefix, error=f"insert failed: {err}")
    self._slot_errors[slot] = prefix.error
    return self._run(self._mark_error_fn, decode_state, jnp.int32(slot))

  def slot_error(self, slot: int) -> str | None:
    return self._slot_errors.get(slot)

  def generate(self, params, decode_state: DecodeState):
    params, version = self._params(params)
    try:
      decode_state, data = self._run(self._generate_fn, params, decode_state, jnp.int32(version))
    except Exception as err:  # pylint: disable=broad-exception-caught
      # Nothing can be trusted in a step that failed: fail every live request, keep serving.
      logger.error("generate step failed: %s", err)
      for slot in range(self.config.max_slots):
        self._slot_errors[slot] = f"decode step failed: {err}"
      decode_state = self.init_decode_state()
      data = np.zeros((self.config.max_slots, 6), np.int32)
      data[:, js.COL_STATUS] = js.STATUS_ERROR
    return decode_state, js.engine_api.ResultTokens(
        data=data, tokens_idx=(0, 1), valid_idx=(1, 2), length_idx=(2, 3), samples_per_slot=1)

  def init_decode_state(self, *args, **kwargs) -> DecodeState:
    slots, cfg = self.config.max_slots, self.model_config

    def build():
      return DecodeState(
          cache=KVCache.zeros(cfg.num_layers, slots, self.config.max_cache_length, cfg.num_kv_heads,
                              cfg.head_dim, jnp.dtype(cfg.dtype)),
          logits=jnp.zeros((slots, cfg.vocab_size), jnp.float32),
          logits_version=jnp.zeros((slots,), jnp.int32),
          positions=jnp.zeros((slots,), jnp.int32), generated=jnp.zeros((slots,), jnp.int32),
          temperature=jnp.zeros((slots,), jnp.float32), top_k=jnp.zeros((slots,), jnp.int32),
          top_p=jnp.ones((slots,), jnp.float32), keys=jnp.zeros((slots, 2), jnp.uint32),
          status=jnp.zeros((slots,), jnp.int32))

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
