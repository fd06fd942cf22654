"""The same model on 1 device and on 8 fake CPU devices under several meshes gives the same numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from toolorch_jax.model import (MeshConfig, create_model, load_hf, load_model_config, make_mesh,
                                save_hf, shard_model)

MESHES = {
    "fsdp8": MeshConfig(data=1, fsdp=8, tensor=1),
    "fsdp4_tensor2": MeshConfig(data=1, fsdp=4, tensor=2),
    "data2_fsdp2_tensor2": MeshConfig(data=2, fsdp=2, tensor=2),
}
LOGITS_TOL = 2e-5  # float32; only the order of reductions differs between layouts
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-6

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (fake) devices")


def batch(config):
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, config.vocab_size, (8, 16)).astype(np.int32)
  mask = np.ones_like(tokens)
  mask[1, :5] = 0  # some left padding
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
  return jnp.asarray(tokens), jnp.asarray(positions), jnp.asarray(mask)


def loss_fn(model, tokens, positions, mask):
  logits, _ = model(tokens, positions, attention_mask=mask)
  ce = optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], tokens[:, 1:])
  weights = (mask[:, 1:] * mask[:, :-1]).astype(jnp.float32)
  return (ce * weights).sum() / weights.sum()


@nnx.jit
def logits_and_grads(model, tokens, positions, mask):
  logits, _ = model(tokens, positions, attention_mask=mask)
  grads = nnx.grad(loss_fn)(model, tokens, positions, mask)
  return logits, grads


@pytest.fixture(scope="module")
def config():
  return load_model_config("tiny")


@pytest.fixture(scope="module")
def reference(config):
  model = create_model(config, seed=7)
  logits, grads = logits_and_grads(model, *batch(config))
  return model, np.asarray(logits), jax.tree.map(np.asarray, nnx.to_pure_dict(grads))


def assert_same(config, mesh, model, reference):
  _, ref_logits, ref_grads = reference
  with jax.set_mesh(mesh):
    logits, grads = logits_and_grads(model, *batch(config))
  np.testing.assert_allclose(np.asarray(logits), ref_logits, atol=LOGITS_TOL, rtol=0)
  flat_ref = jax.tree_util.tree_leaves_with_path(ref_grads)
  flat = dict(jax.tree_util.tree_leaves_with_path(jax.tree.map(np.asarray, nnx.to_pure_dict(grads))))
  for path, ref in flat_ref:
    np.testing.assert_allclose(flat[path], ref, rtol=GRAD_RTOL, atol=GRAD_ATOL,
                               err_msg=jax.tree_util.keystr(path))


def assert_split(model, mesh, mesh_config):
  """Parameters are really distributed: each device holds only its shard."""
  q = model.layers[0].attn.q_proj.get_value()
  emb = model.embedding.get_value()
  up = model.layers[1].mlp.up_proj.get_value()
  expected = [(q, P("fsdp", "tensor", None)), (emb, P("tensor", "fsdp")), (up, P("fsdp", "tensor"))]
  for array, spec in expected:
    assert array.sharding.is_equivalent_to(NamedSharding(mesh, spec), array.ndim), array.sharding
    shard = array.addressable_shards[0].data.shape
    split = mesh_config.fsdp * mesh_config.tensor
    assert np.prod(shard) * split == np.prod(array.shape), (array.shape, shard)


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
def test_created_sharded_model_matches_single_device(config, reference, mesh_name):
  mesh = make_mesh(MESHES[mesh_name])
  model = create_model(config, mesh=mesh, seed=7)
  assert_split(model, mesh, MESHES[mesh_name])
  assert_same(config, mesh, model, reference)


def test_resharded_and_hf_loaded_models_match(config, reference, tmp_path):
  mesh_config = MESHES["data2_fsdp2_tensor2"]
  mesh = make_mesh(mesh_config)
  resharded = shard_model(reference[0], mesh)
  assert_split(resharded, mesh, mesh_config)
  assert_same(config, mesh, resharded, reference)
  save_hf(reference[0], config, tmp_path / "hf")
  loaded, _ = load_hf(tmp_path / "hf", mesh=mesh)
  assert_split(loaded, mesh, mesh_config)
  assert_same(config, mesh, loaded, reference)
