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


def make_mesh(config: MeshConfig | None = None, devices: Sequence[jax.Device] | None = None) -> Mesh:
  """Builds an Auto-typed (GSPMD) mesh with axes (data, fsdp, tensor) over `devices` (default:
  as many of JAX's devices as the config asks for, or all of them when an axis is -1)."""
  config = config or MeshConfig()
  if devices is None:
    devices = jax.devices()
    wanted = config.num_devices or len(devices)
    if wanted > len(devices):
      raise ConfigError(f"mesh: {config} needs {wanted} devices, JAX has {len(devices)}")
    devices = devices[:wanted]
  shape = config.shape(len(devices))
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 3)


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
