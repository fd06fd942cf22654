"""Model behaviour beyond HF parity: packing, remat, dtypes."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from toolorch_jax.model import create_model, load_model_config


def positions_for(tokens):
  return jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape)


def test_packed_segments_equal_separate_sequences():
  model = create_model(load_model_config("tiny"), seed=1)
  rng = np.random.default_rng(0)
  a = rng.integers(0, 512, (1, 5)).astype(np.int32)
  b = rng.integers(0, 512, (1, 7)).astype(np.int32)
  packed = jnp.asarray(np.concatenate([a, b, np.zeros((1, 2), np.int32)], axis=1))
  segments = jnp.asarray([[1] * 5 + [2] * 7 + [0] * 2])
  positions = jnp.asarray([list(range(5)) + list(range(7)) + [0, 0]])
  logits, _ = model(packed, positions, segment_ids=segments)
  alone_a, _ = model(jnp.asarray(a), positions_for(a))
  alone_b, _ = model(jnp.asarray(b), positions_for(b))
  np.testing.assert_allclose(logits[0, :5], alone_a[0], atol=1e-5)
  np.testing.assert_allclose(logits[0, 5:12], alone_b[0], atol=1e-5)


def test_remat_keeps_logits_and_gradients():
  config = load_model_config("tiny")
  tokens = jnp.asarray(np.random.default_rng(1).integers(0, 512, (2, 9)), jnp.int32)

  def loss(model):
    logits, _ = model(tokens, positions_for(tokens))
    return jax.nn.log_softmax(logits).mean()

  grads = {}
  for remat in ("none", "full", "dots_saveable"):
    model = create_model(config.replace(remat=remat), seed=3)
    grads[remat] = nnx.to_pure_dict(nnx.jit(nnx.grad(loss))(model))
  for remat in ("full", "dots_saveable"):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7),
                 grads[remat], grads["none"])


def test_bfloat16_params_and_compute_stay_close_to_float32():
  config = load_model_config("tiny")
  tokens = jnp.asarray(np.random.default_rng(2).integers(0, 512, (2, 12)), jnp.int32)
  reference = create_model(config, seed=4)
  f32, _ = reference(tokens, positions_for(tokens))
  weights = nnx.state(reference, nnx.Param)
  for dtypes in ({"param_dtype": "bfloat16", "dtype": "bfloat16"}, {"dtype": "bfloat16"}):
    model = create_model(config.replace(**dtypes), seed=0)
    pdt = jnp.dtype(dtypes.get("param_dtype", "float32"))
    nnx.update(model, jax.tree.map(lambda w: w.astype(pdt), weights))
    assert model.layers[0].mlp.up_proj[...].dtype == pdt
    logits, _ = model(tokens, positions_for(tokens))
    assert logits.dtype == jnp.float32  # logits are always float32
    error = np.abs(np.asarray(logits) - np.asarray(f32)).max()
    assert 0 < error < 0.03, (dtypes, error)  # bf16 rounding, nothing more


def test_bfloat16_cached_decode_stays_close_to_its_full_forward():
  """A decode step attends by its own path (one query per row); in bfloat16 it must round no
  worse than the full forward does."""
  config = load_model_config("tiny").replace(param_dtype="bfloat16", dtype="bfloat16")
  model = create_model(config, seed=0)
  tokens = jnp.asarray(np.random.default_rng(5).integers(0, 512, (2, 12)), jnp.int32)
  full, _ = model(tokens, positions_for(tokens))
  cache = model.init_cache(batch_size=2, max_length=16)
  logits, cache = model(tokens[:, :8], positions_for(tokens)[:, :8], cache)
  steps = [logits]
  for t in range(8, 12):
    logits, cache = model(tokens[:, t:t + 1], positions_for(tokens)[:, t:t + 1], cache)
    steps.append(logits)
  error = np.abs(np.asarray(jnp.concatenate(steps, axis=1)) - np.asarray(full)).max()
  assert error < 0.03, error
