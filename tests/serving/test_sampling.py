"""The engine's argmax and categorical draw against JAX's own, index for index."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from toolorch_jax.serving.sampling import categorical, first_max_index


def _rows(vocab: int) -> jax.Array:
  """Random rows, rows of ties (rounded values), all -inf, a NaN, and +inf twice."""
  noise = jax.random.normal(jax.random.key(0), (64, vocab)) * 3
  special = np.zeros((4, vocab), np.float32)
  special[0] = -np.inf
  special[1, vocab // 2] = np.nan
  special[1, vocab - 1] = np.nan
  special[2, [1, vocab - 1]] = np.inf
  special[3, vocab // 3:] = 7.0  # a run of equal maxima
  return jnp.concatenate([noise, jnp.round(noise), jnp.asarray(special)])


@pytest.mark.parametrize("vocab", [3, 2048, 32768])
def test_first_max_index_is_jnp_argmax(vocab):
  rows = _rows(vocab)
  np.testing.assert_array_equal(jax.jit(first_max_index)(rows), jnp.argmax(rows, axis=-1))


@pytest.mark.parametrize("vocab", [5, 4096])
def test_categorical_draws_what_jax_random_categorical_draws(vocab):
  keys = jax.random.split(jax.random.key(7), 256)
  logits = jax.random.normal(jax.random.key(1), (256, vocab)) * 2
  logits = logits.at[:8, :vocab // 2].set(-jnp.inf)  # masked entries, as top-k/top-p leave them
  ours = jax.jit(jax.vmap(categorical))(keys, logits)
  np.testing.assert_array_equal(ours, jax.jit(jax.vmap(jax.random.categorical))(keys, logits))
  assert len(set(np.asarray(ours).tolist())) > 1  # the draw is not one index
