"""The two weight layouts hold the same model: same weights for a seed, same numbers, and each
sharded by its own logical axes (transformers' parity in both layouts is in test_hf_parity.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P

from toolorch_jax.config import ConfigError
from toolorch_jax.model import MeshConfig, create_model, load_model_config, make_mesh
from toolorch_jax.model.layout import relayout


@pytest.fixture(scope="module")
def config():
  return load_model_config("tiny")  # untied lm_head, grouped-query attention


def leaves(model):
  return {jax.tree_util.keystr(path): np.asarray(array)
          for path, array in jax.tree_util.tree_leaves_with_path(nnx.state(model))}


def test_a_seed_draws_the_same_weights_in_both_layouts(config):
  in_out = create_model(config, seed=3)
  out_in = create_model(config.replace(weight_layout="out_in"), seed=3)
  stored = leaves(out_in)
  q = stored["['layers'][0]['attn']['q_proj'].value"]
  assert q.shape == (config.num_heads, config.head_dim, config.hidden_size)
  assert stored["['lm_head'].value"].shape == (config.vocab_size, config.hidden_size)
  moved = leaves(relayout(in_out, "out_in"))
  assert moved.keys() == stored.keys()
  for name, array in stored.items():
    np.testing.assert_array_equal(moved[name], array, err_msg=name)
  back = leaves(relayout(out_in, "in_out"))
  for name, array in leaves(in_out).items():
    np.testing.assert_array_equal(back[name], array, err_msg=name)
  assert relayout(in_out, "in_out") is in_out


def test_both_layouts_give_the_same_logits_with_and_without_a_cache(config):
  in_out = create_model(config, seed=1)
  out_in = relayout(in_out, "out_in")
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, config.vocab_size, (2, 9)), jnp.int32)
  positions = jnp.broadcast_to(jnp.arange(9), (2, 9))
  full = [np.asarray(m(tokens, positions)[0]) for m in (in_out, out_in)]
  np.testing.assert_allclose(full[1], full[0], atol=2e-5, rtol=0)
  cache = out_in.init_cache(2, 16)
  _, cache = out_in(tokens[:, :8], positions[:, :8], cache)
  last, _ = out_in(tokens[:, 8:], positions[:, 8:], cache)
  np.testing.assert_allclose(np.asarray(last)[:, 0], full[0][:, 8], atol=2e-5, rtol=0)


@pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 (fake) devices")
def test_out_in_weights_are_sharded_by_their_own_axes(config):
  mesh = make_mesh(MeshConfig(data=1, fsdp=4, tensor=2))
  model = relayout(create_model(config, seed=0), "out_in", mesh)
  expected = [(model.layers[0].attn.q_proj, P("tensor", None, "fsdp")),
              (model.layers[0].attn.o_proj, P("fsdp", "tensor", None)),
              (model.layers[1].mlp.up_proj, P("tensor", "fsdp")),
              (model.layers[1].mlp.down_proj, P("fsdp", "tensor"))]
  for variable, spec in expected:
    array = variable.get_value()
    assert array.sharding.is_equivalent_to(NamedSharding(mesh, spec), array.ndim), array.sharding
  assert model.layers[0].attn.q_proj.get_metadata()["logical_axes"] == ("heads", "head_dim", "embed")


def test_an_unknown_layout_is_refused_by_name(config):
  with pytest.raises(ConfigError, match="model.weight_layout"):
    config.replace(weight_layout="transposed")
