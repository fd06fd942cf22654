"""Properties of the logical-axis rules, for any mesh and any shape."""

import math

import jax
from hypothesis import given, settings, strategies as st

from toolorch_jax.model import MeshConfig, make_mesh
from toolorch_jax.model.sharding import LOGICAL_RULES, logical_to_spec

MESH_SHAPES = [(1, 8, 1), (1, 4, 2), (2, 2, 2), (8, 1, 1), (1, 1, 8), (2, 4, 1)]


@settings(max_examples=200, deadline=None)
@given(mesh_shape=st.sampled_from(MESH_SHAPES),
       axes=st.lists(st.sampled_from(sorted(LOGICAL_RULES)), min_size=1, max_size=4, unique=True),
       dims=st.lists(st.integers(1, 48), min_size=4, max_size=4))
def test_specs_always_divide_and_never_reuse_a_mesh_axis(mesh_shape, axes, dims):
  mesh = make_mesh(MeshConfig(*mesh_shape), jax.devices()[:8])
  shape = dims[:len(axes)]
  with jax.set_mesh(mesh):
    spec = logical_to_spec(axes, shape)
  used = []
  for dim, entry in zip(shape, spec):
    names = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
    assert dim % math.prod(mesh.shape[n] for n in names) == 0
    used += names
  assert len(used) == len(set(used))


def test_without_a_mesh_rules_name_their_mesh_axes():
  assert tuple(logical_to_spec(("embed", "mlp"))) == ("fsdp", "tensor")
  assert tuple(logical_to_spec(("batch", "seq"))) == (("data", "fsdp"), None)
