"""Device mesh and the logical-axis rules that place parameters and activations on it.

Parameters and activations are annotated with logical axis names (`embed`, `heads`, ...). One rules
table maps each to mesh axes (`data`, `fsdp`, `tensor`), in the style of MaxText and Tunix: the same
model code then runs on one CPU, 8 fake CPU devices, a GPU host or a TPU pod.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

from toolorch_jax.config import ConfigError

MESH_AXES = ("data", "fsdp", "tensor")

# logical axis -> mesh axes it is split over (None: replicated).
LOGICAL_RULES: dict[str, tuple[str, ...] | None] = {
    # parameters
    "vocab": ("tensor",),
    "embed": ("fsdp",),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": None,
    "mlp": ("tensor",),
    "norm": None,
    # activations
    "batch": ("data", "fsdp"),
    "seq": None,
    "act_embed": None,
    "act_heads": ("tensor",),
    "act_kv_heads": ("tensor",),
    "act_mlp": ("tensor",),
    "act_vocab": ("tensor",),
    "cache_seq": None,
}


@dataclasses.dataclass
class MeshConfig:
  """Mesh shape; one axis may be -1 to take the remaining devices."""

  data: int = 1
  fsdp: int = -1
  tensor: int = 1

  def shape(self, num_devices: int) -> tuple[int, int, int]:
    sizes = [self.data, self.fsdp, self.tensor]
    if sizes.count(-1) > 1:
      raise ConfigError("mesh: at most one of data/fsdp/tensor may be -1")
    if any(s == 0 or s < -1 for s in sizes):
      raise ConfigError(f"mesh: axis sizes must be positive or -1, got {self}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
      if num_devices % known:
        raise ConfigError(f"mesh: {num_devices} devices do not divide into {self}")
      sizes[sizes.index(-1)] = num_devices // known
    if math.prod(sizes) != num_devices:
      raise ConfigError(
          f"mesh: data*fsdp*tensor = {math.prod(sizes)} but {num_devices} devices are in use")
    return tuple(sizes)

  @classmethod
  def parse(cls, text: str) -> "MeshConfig":
    """Parses `fsdp=4,tensor=2` (axes not named are 1)."""
    sizes = {"data": 1, "fsdp": 1, "tensor": 1}
    for part in filter(None, text.replace(" ", "").split(",")):
      name, _, value = part.partition("=")
      if name not in sizes or not value.lstrip("-").isdigit():
        raise ConfigError(f"mesh: '{part}' is not axis=size with axis in {MESH_AXES}")
      sizes[name] = int(value)
    return cls(**sizes)

  @property
  def num_devices(self) -> int | None:
    """Devices this mesh needs, or None when an axis is -1."""
    sizes = (self.data, self.fsdp, self.tensor)
    return None if -1 in sizes else math.prod(sizes)


def host_aware_devices(count: int | None = None) -> list[jax.Device]:
  """`count` devices (default: all) taken evenly from every process, process by process and by id
  within a process. A mesh built from them in this order keeps its fastest-varying axes (tensor,
  then fsdp) inside a host, and a mesh smaller than the job still spans every host, so every
  process feeds its rows and runs its share."""
  by_process: dict[int, list[jax.Device]] = {}
  for device in sorted(jax.devices(), key=lambda d: (d.process_index, d.id)):
    by_process.setdefault(device.process_index, []).append(device)
  processes = len(by_process)
  count = len(jax.devices()) if count is None else count
  per_process = min(len(devices) for devices in by_process.values())
  if count % processes or count // processes > per_process:
    raise ConfigError(f"mesh: {count} devices cannot be taken evenly from {processes} processes"
                      f" with {per_process} devices each")
  return [d for index in sorted(by_process) for d in by_process[index][:count // processes]]


def make_mesh(config: MeshConfig | None = None, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """Builds an Auto-typed (GSPMD) mesh with axes (data, fsdp, tensor) over `devices` (default:
  as many devices as the config asks for, or all of them when an axis is -1, in the host-aware
  order of `host_aware_devices`)."""
  config = config or MeshConfig()
  if devices is None:
    wanted = config.num_devices or len(jax.devices())
    if wanted > len(jax.devices()):
      raise ConfigError(f"mesh: {config} needs {wanted} devices, JAX has {len(jax.devices())}")
    devices = host_aware_devices(wanted)
  shape = config.shape(len(devices))
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3)


def local_mesh(mesh: Mesh) -> Mesh:
  """The part of `mesh` on this process's devices, with the same axes: where a host runs work
  that is its own (its rollouts), without collectives across hosts. On one process, `mesh`."""
  if not mesh.is_multi_process:
    return mesh
  local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
  tensor = mesh.shape["tensor"] if len(local) % mesh.shape["tensor"] == 0 else 1
  return make_mesh(MeshConfig(data=1, fsdp=len(local) // tensor, tensor=tensor), local)


def transfer(tree, shardings):
  """`jax.device_put(tree, shardings)`, also from arrays spread over several processes onto
  another device set, which device_put refuses ("Cannot reshard an input that is not fully
  addressable"). Such a leaf is gathered into each host's memory and placed from there, one leaf
  at a time, so the extra device memory is one leaf (measured on 2 CPU processes x 4 devices,
  64 KiB: 5.2 ms per leaf this way, 12.3 ms through a replicated on-device copy)."""
  from jax.experimental import multihost_utils

  def move(leaf, sharding):
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
      leaf = multihost_utils.process_allgather(leaf, tiled=True)
    return jax.device_put(leaf, sharding)

  # `shardings` may be a prefix of `tree` (a sharding per nnx.Variable), as for device_put.
  return jax.tree.map(lambda sharding, part: jax.tree.map(lambda leaf: move(leaf, sharding), part),
                      shardings, tree)


def global_array(value, sharding: NamedSharding) -> jax.Array:
  """The array `value` (which every process holds in full, e.g. a packed batch) on `sharding`,
  each process handing JAX only the rows its devices hold (`make_array_from_process_local_data`).
  An array already on the mesh is resharded in place."""
  if isinstance(value, jax.Array) or not sharding.mesh.is_multi_process:
    return jax.device_put(value, sharding)
  boxes = sharding.addressable_devices_indices_map(value.shape).values()
  local = tuple(slice(min(box[d].indices(n)[0] for box in boxes),
                      max(box[d].indices(n)[1] for box in boxes))
                for d, n in enumerate(value.shape))
  return jax.make_array_from_process_local_data(sharding, value[local], value.shape)


def within(mesh: Mesh | None) -> contextlib.AbstractContextManager:
  """`jax.set_mesh(mesh)`, or nothing when there is no mesh: where sharded programs run."""
  return contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh)


def _current_mesh_sizes() -> dict[str, int]:
  mesh = jax.sharding.get_abstract_mesh()
  return {} if mesh.empty else dict(mesh.shape)


def has_mesh() -> bool:
  return bool(_current_mesh_sizes())


def logical_to_spec(
    logical_axes: Sequence[str | None], shape: Sequence[int] | None = None
) -> PartitionSpec:
  """Mesh PartitionSpec for logical axes under the current mesh.

  A dimension is only split over mesh axes that exist and divide it; otherwise that dimension is
  replicated (e.g. 2 KV heads on tensor=4), which keeps every preset valid on every mesh.
  """
  sizes = _current_mesh_sizes()
  spec = []
  used: set[str] = set()
  for i, name in enumerate(logical_axes):
    if name is not None and name not in LOGICAL_RULES:
      raise KeyError(f"logical axis '{name}' has no sharding rule")
    mesh_axes = LOGICAL_RULES.get(name) if name else None
    kept = []
    for axis in mesh_axes or ():
      if axis in used or (sizes and axis not in sizes):
        continue
      size = sizes.get(axis, 1)
      dim = shape[i] if shape is not None else None
      if dim is not None and dim % (size * math.prod(sizes.get(a, 1) for a in kept)):
        continue
      kept.append(axis)
    used.update(kept)
    spec.append(tuple(kept) if len(kept) > 1 else (kept[0] if kept else None))
  return PartitionSpec(*spec)


def constrain(x: jax.Array, logical_axes: Sequence[str | None]) -> jax.Array:
  """Annotates an activation's sharding; a no-op when no mesh is set."""
  if not has_mesh():
    return x
  return jax.lax.with_sharding_constraint(x, logical_to_spec(logical_axes, x.shape))


def named_sharding(mesh: Mesh, logical_axes: Sequence[str | None], shape: Sequence[int]) -> NamedSharding:
  with jax.set_mesh(mesh):
    return NamedSharding(mesh, logical_to_spec(logical_axes, shape))
