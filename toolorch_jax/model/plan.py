"""Per-device memory of one training step, read from the compiled program without any weights.

The step (forward, backward, AdamW update, donated state) is lowered with abstract, sharded inputs
and compiled for the mesh; XLA's memory analysis of that SPMD program gives per-device bytes.
Parameter, optimizer and gradient bytes are the per-device shard sizes; activations are the
compiled temporaries minus the gradients.

The decoder layers are compiled as one `lax.scan` over stacked layer weights (the layout MaxText
trains with), running the model's own layer code. This compiles a 36-layer model as fast as one
layer, and it is what makes the figure honest on CPU: XLA's CPU scheduler hoists rematerialised
recomputation of an unrolled program into the forward pass, so remat would appear to save nothing,
whereas inside a scan each layer's recomputation stays in its backward iteration.
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from toolorch_jax.model.cache import CACHE_AXES, KVCache
from toolorch_jax.model.config import ModelConfig
from toolorch_jax.model.qwen3 import DecoderLayer, Qwen3, attention_mask_for
from toolorch_jax.model.sharding import MeshConfig, logical_to_spec, make_mesh, named_sharding

GIB = 2**30


def format_bytes(value: float) -> str:
  if value >= 0.1 * GIB:
    return f"{value / GIB:9.2f} GiB"
  return f"{value / 2**20:9.2f} MiB"


@dataclasses.dataclass
class MemoryPlan:
  model_name: str
  mesh: tuple[int, int, int]
  batch: int
  seq_len: int
  num_layers: int
  remat: str
  hbm_bytes: int
  params_bytes: int
  optimizer_bytes: int
  gradient_bytes: int
  activation_bytes: int
  batch_bytes: int
  argument_bytes: int  # XLA: inputs (parameters, optimizer state, batch)
  temp_bytes: int  # XLA: temporaries (gradients, activations, workspace)
  peak_bytes: int  # XLA: arguments + outputs - donated aliases + temporaries
  compile_seconds: float
  batch_name: str = "global batch"  # a run's step scans micro-batches: the plan is one of them
  attention_query_block: int = 0

  @property
  def fits(self) -> bool:
    return self.peak_bytes <= self.hbm_bytes

  def render(self) -> str:
    data, fsdp, tensor = self.mesh
    blocks = (f", attention_query_block={self.attention_query_block}"
              if self.attention_query_block else "")
    lines = [
        f"model {self.model_name}: {self.num_layers} layers, remat={self.remat}{blocks}; mesh"
        f" data={data} fsdp={fsdp} tensor={tensor} ({math.prod(self.mesh)} devices); {self.batch_name}"
        f" {self.batch} x {self.seq_len} tokens; AdamW",
        f"compiled one train step ({self.num_layers} layers as a lax.scan) on fake CPU devices"
        f" in {self.compile_seconds:.1f} s; per-device memory from XLA's memory analysis:",
    ]
    rows = [
        ("parameters", self.params_bytes),
        ("optimizer state (AdamW mu, nu)", self.optimizer_bytes),
        ("gradients", self.gradient_bytes),
        ("activations + workspace", self.activation_bytes),
        ("input batch", self.batch_bytes),
        ("peak", self.peak_bytes),
    ]
    lines += [f"  {label:<32} {format_bytes(value)}" for label, value in rows]
    verdict = "FITS" if self.fits else "DOES NOT FIT"
    lines.append(f"{verdict} in {self.hbm_bytes / GIB:g} GiB per device"
                 f" ({100 * self.peak_bytes / self.hbm_bytes:.0f}% used)")
    return "\n".join(lines)


def _shard_bytes(tree) -> int:
  return sum(math.prod(leaf.sharding.shard_shape(leaf.shape)) * jnp.dtype(leaf.dtype).itemsize
             for leaf in jax.tree.leaves(tree))


def _abstract(build, mesh):
  """(graphdef, state of ShapeDtypeStructs carrying their NamedShardings) of a module."""
  with jax.set_mesh(mesh):
    module = nnx.eval_shape(build)
  graphdef, state = nnx.split(module)
  shardings = nnx.get_named_sharding(state, mesh)
  return graphdef, jax.tree.map(
      lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings)


def _stack(layer_state, num_layers: int, mesh):
  """Layer weights stacked on a new leading, unsharded axis."""
  def stacked(a):
    spec = PartitionSpec(None, *a.sharding.spec)
    return jax.ShapeDtypeStruct((num_layers, *a.shape), a.dtype, sharding=NamedSharding(mesh, spec))
  return jax.tree.map(stacked, layer_state)


def plan_memory(config: ModelConfig, mesh_config: MeshConfig, *, model_name: str, batch: int,
                seq_len: int, hbm_gib: float) -> MemoryPlan:
  """Compiles the training step on (fake) devices and reports per-device memory."""
  devices = mesh_config.num_devices
  if devices is None:
    raise ValueError("plan needs explicit mesh sizes (no -1)")
  if jax.device_count() < devices:
    raise RuntimeError(f"mesh needs {devices} devices but JAX has {jax.device_count()}; run"
                       f" with XLA_FLAGS=--xla_force_host_platform_device_count={devices}")
  mesh = make_mesh(mesh_config, jax.devices()[:devices])

  # The model without its layers (embedding, final norm, head) plus all layers stacked.
  def shell():
    model = Qwen3(config.replace(num_layers=1), rngs=nnx.Rngs(0))
    model.layers = nnx.List([])
    return model

  shell_def, shell_params = _abstract(shell, mesh)
  layer_def, layer_params = _abstract(lambda: DecoderLayer(config, rngs=nnx.Rngs(0)), mesh)
  params = (shell_params, _stack(layer_params, config.num_layers, mesh))
  optimizer = optax.adamw(1e-6, weight_decay=0.01)
  replicated = NamedSharding(mesh, PartitionSpec())
  opt_state = optax.tree_utils.tree_map_params(  # moments laid out like their parameters
      optimizer, lambda o, p: jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=p.sharding),
      jax.eval_shape(optimizer.init, params), params,
      transform_non_params=lambda o: jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=replicated))
  with jax.set_mesh(mesh):
    batch_spec = logical_to_spec(("batch", "seq"), (batch, seq_len))
  tokens = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32,
                                sharding=NamedSharding(mesh, batch_spec))

  def loss_fn(params, tokens):
    shell_params, layer_params = params
    model = nnx.merge(shell_def, shell_params)
    positions = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape)
    mask, _, _ = attention_mask_for(tokens.shape, None, None, None)
    step = model.layer_step

    def body(x, one_layer):
      x, _ = step(nnx.merge(layer_def, one_layer), x, positions, mask, None, None)
      return x, None

    x, _ = jax.lax.scan(body, model.embed(tokens), layer_params)
    logits = model.unembed(x)
    return optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], tokens[:, 1:]).mean()

  def train_step(params, opt_state, tokens):
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  start = time.perf_counter()
  with jax.set_mesh(mesh):
    compiled = jax.jit(train_step, donate_argnums=(0, 1)).lower(params, opt_state, tokens).compile()
  seconds = time.perf_counter() - start
  memory = compiled.memory_analysis()
  params_bytes = _shard_bytes(params)
  gradients = params_bytes  # same shapes, dtypes and shardings as the parameters
  temp = memory.temp_size_in_bytes
  return MemoryPlan(
      model_name=model_name, mesh=tuple(mesh.devices.shape), batch=batch, seq_len=seq_len,
      num_layers=config.num_layers, remat=config.remat, hbm_bytes=int(hbm_gib * GIB),
      attention_query_block=config.attention_query_block,
      params_bytes=params_bytes, optimizer_bytes=_shard_bytes(opt_state), gradient_bytes=gradients,
      activation_bytes=max(temp - gradients, 0), batch_bytes=_shard_bytes(tokens),
      argument_bytes=memory.argument_size_in_bytes, temp_bytes=temp,
      peak_bytes=(memory.argument_size_in_bytes + memory.output_size_in_bytes
                  - memory.alias_size_in_bytes + temp),
      compile_seconds=seconds)


@dataclasses.dataclass
class CachePlan:
  """Per-device bytes of a decode engine's state: the KV cache of `slots` sequences of
  `max_length` tokens, laid out as the engine lays it out (slots over data x fsdp, KV heads over
  tensor), plus its per-slot bookkeeping and last logits (counted as replicated)."""

  slots: int
  max_length: int
  cache_bytes: int

  def render(self) -> str:
    return (f"  {f'KV cache ({self.slots} slots x {self.max_length} tok)':<32}"
            f" {format_bytes(self.cache_bytes)}")


def plan_kv_cache(config: ModelConfig, mesh_config: MeshConfig, *, slots: int,
                  max_length: int) -> CachePlan:
  mesh = make_mesh(mesh_config, jax.devices()[:mesh_config.num_devices])
  with jax.set_mesh(mesh):
    cache = jax.eval_shape(lambda: KVCache.zeros(
        config.num_layers, slots, max_length, config.num_kv_heads, config.head_dim,
        jnp.dtype(config.dtype)))
  shape = cache.keys[0].shape
  per_layer = math.prod(named_sharding(mesh, CACHE_AXES, shape).shard_shape(shape))
  kv = 2 * config.num_layers * per_layer * cache.keys[0].dtype.itemsize
  bookkeeping = math.prod(cache.valid.shape) + 4 * slots * (config.vocab_size + 4)
  return CachePlan(slots=slots, max_length=max_length, cache_bytes=kv + bookkeeping)


@dataclasses.dataclass
class RecipePlan:
  """A run config's memory on one cluster: its train step, and the rollout engine's KV cache
  that stays allocated beside it (rollouts and updates take turns on the same devices)."""

  cluster: str
  description: str
  train: MemoryPlan
  cache: CachePlan

  @property
  def total_bytes(self) -> int:
    return self.train.peak_bytes + self.cache.cache_bytes

  def render(self) -> str:
    head = f"cluster {self.cluster}" + (f" ({self.description})" if self.description else "")
    body = self.train.render().splitlines()[:-1]  # its verdict is for the step alone
    hbm = self.train.hbm_bytes
    verdict = "FITS" if self.total_bytes <= hbm else "DOES NOT FIT"
    return "\n".join([head, *body, "rollout engine, per device (weights shared with the step):",
                      self.cache.render(),
                      f"  {'train step peak + KV cache':<32} {format_bytes(self.total_bytes)}",
                      f"{verdict} in {hbm / GIB:g} GiB per device ({100 * self.total_bytes / hbm:.0f}% used)"])
