"""The clipped policy loss on hand-computed arrays, and its gradient against the analytic one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from toolorch_jax.config import ConfigError
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.loss import (aggregate, chunked_token_log_probs, kl_penalty, policy_loss_terms,
                                  target_log_probs, token_log_probs)

LOGP = jnp.log(jnp.array([[1.0, 1.5, 0.5, 1.1, 0.7, 20.0]]))  # ratios when old_logp = 0
ADV = jnp.array([[1.0, 1.0, -1.0, -1.0, 1.0, -1.0]])


def test_ratios_clipping_and_dual_clip_by_hand():
  loss, diag = policy_loss_terms(LOGP, jnp.zeros_like(LOGP), ADV, clip_low=0.2, clip_high=0.28,
                                 dual_clip=10.0)
  # r=1.0,A=1: -1; r=1.5,A=1: max(-1.5, -1.28) = -1.28 (clipped); r=0.5,A=-1: max(0.5, 0.8) = 0.8
  # (clipped); r=1.1,A=-1: max(1.1, 1.1) = 1.1; r=0.7,A=1: max(-0.7, -0.8) = -0.7;
  # r=20,A=-1: max(20, 1.28) = 20 -> dual clip caps at 10.
  np.testing.assert_allclose(loss[0], [-1.0, -1.28, 0.8, 1.1, -0.7, 10.0], rtol=1e-6)
  np.testing.assert_allclose(diag["ratio"][0], [1.0, 1.5, 0.5, 1.1, 0.7, 20.0], rtol=1e-6)
  np.testing.assert_array_equal(diag["clipped"][0], [0, 1, 1, 0, 0, 1])
  no_dual, _ = policy_loss_terms(LOGP, jnp.zeros_like(LOGP), ADV, dual_clip=None)
  assert float(no_dual[0, 5]) == 20.0


def test_kl_and_truncated_importance_sampling():
  logp = jnp.array([[-1.0, -2.0]])
  loss, diag = policy_loss_terms(logp, logp, jnp.zeros_like(logp), ref_logp=jnp.array([[-1.5, -2.0]]),
                                 kl_coef=0.1)
  np.testing.assert_allclose(diag["kl"][0], [0.125, 0.0])
  np.testing.assert_allclose(loss[0], [0.0125, 0.0])
  weighted, _ = policy_loss_terms(logp, logp, jnp.ones_like(logp), rollout_logp=jnp.array([[-3.0, -1.9]]),
                                  tis_cap=2.0)
  # weights min(exp(old - rollout), 2) = [min(e^2, 2), e^-0.1]
  np.testing.assert_allclose(weighted[0], [-2.0, -np.exp(-0.1)], rtol=1e-6)


def test_gradient_equals_the_analytic_one():
  mask = jnp.array([[1.0, 1.0, 1.0, 1.0, 0.0, 1.0]])

  def total(logp):
    per_token, _ = policy_loss_terms(logp, jnp.zeros_like(logp), ADV)
    return aggregate(per_token, mask, "token_mean")

  grad = jax.grad(total)(LOGP)
  ratio = np.exp(np.asarray(LOGP))
  # d/dlogp of -A r is -A r where the unclipped term is active; 0 where a clip is active; 0 off-mask.
  active = np.array([[1, 0, 0, 1, 0, 0]])  # token 4 is masked; 1, 2, 5 are clipped
  expected = -np.asarray(ADV) * ratio * active / mask.sum()
  np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)


def test_sequence_mean_aggregation():
  per_token = jnp.array([[1.0, 3.0, 10.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
  mask = jnp.array([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
  segments = jnp.array([[1, 1, 2, 0], [1, 1, 1, 1]])
  # sequences: (1, 3) -> 2; (10) -> 10; (2, 2, 2, 2) -> 2 => mean 14 / 3
  np.testing.assert_allclose(aggregate(per_token, mask, "sequence_mean", segments), 14 / 3, rtol=1e-6)
  np.testing.assert_allclose(aggregate(per_token, mask, "token_mean"), 22 / 7, rtol=1e-6)


def test_kl_estimators_are_verls():
  """verl's kl_penalty names: "mse" (k2) 1/2 d^2, "k1" d, "low_var_kl" (k3) e^-d + d - 1, for
  d = log p - log p_ref; k3 is clamped to [-10, 10]."""
  logp, ref = jnp.array([[-1.0, -2.0, 0.0]]), jnp.array([[-1.5, -2.0, -20.0]])
  d = np.array([0.5, 0.0, 20.0])
  for estimator, expected in [("mse", 0.5 * d**2), ("k1", d),
                              ("low_var_kl", np.minimum(np.exp(-d) + d - 1, 10.0))]:
    np.testing.assert_allclose(kl_penalty(logp, ref, estimator)[0], expected, rtol=1e-6)
    _, diag = policy_loss_terms(logp, logp, jnp.zeros_like(logp), ref_logp=ref, kl_coef=1e-4,
                                kl_estimator=estimator)
    np.testing.assert_allclose(diag["kl"][0], expected, rtol=1e-6)


def test_grpo_config_checks_the_loss_settings():
  assert GRPOConfig().kl_estimator == "mse"
  for bad, key in [({"kl_estimator": "k2"}, "grpo.kl_estimator"), ({"dual_clip": 1.0}, "grpo.dual_clip"),
                   ({"clip_low": 1.0}, "grpo.clip_low")]:
    with pytest.raises(ConfigError, match=key):
      GRPOConfig(**bad)
  assert GRPOConfig(dual_clip=None).dual_clip is None


def test_log_probs_and_entropy_gradients_are_the_analytic_ones():
  # d log p_t / dx = onehot(t) - p; d H / dx = -p (log p + H); checked in float64 numpy.
  keys = jax.random.split(jax.random.key(1), 4)
  logits = 3.0 * jax.random.normal(keys[0], (2, 5, 40))
  targets = jax.random.randint(keys[1], (2, 5), 0, 40)
  weights = jax.random.normal(keys[2], (2, 2, 5))

  def loss(logits):
    logp, entropy = token_log_probs(logits, targets)
    return jnp.sum(weights[0] * logp + weights[1] * entropy), (logp, entropy)

  grad, (logp, entropy) = jax.jit(jax.grad(loss, has_aux=True))(logits)
  x = np.asarray(logits, np.float64)
  log_p = x - x.max(-1, keepdims=True)
  log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
  p = np.exp(log_p)
  h = -(p * log_p).sum(-1)
  one_hot = np.eye(40)[np.asarray(targets)]
  a, b = (np.asarray(w, np.float64)[..., None] for w in weights)
  expected = a * (one_hot - p) - b * p * (log_p + h[..., None])
  np.testing.assert_allclose(logp, np.take_along_axis(log_p, np.asarray(targets)[..., None], -1)[..., 0],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(entropy, h, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)
  # The one-pass gradient against autodiff through log_softmax and a gather, under vmap too.
  through_log_softmax = lambda x: jnp.take_along_axis(
      jax.nn.log_softmax(x, axis=-1), targets[..., None], axis=-1)[..., 0]
  for log_probs in (target_log_probs, jax.vmap(target_log_probs)):
    (ours,), (autodiff,) = (jax.vjp(f, logits)[1](weights[0]) for f in
                            (lambda x: log_probs(x, targets), through_log_softmax))
    np.testing.assert_allclose(ours, autodiff, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("chunk_len", [1, 3, 7, 9])
def test_chunked_log_probs_and_gradients_equal_the_full_logits(chunk_len):
  # 7 positions: chunks of 3 leave a ragged last chunk, 9 is one padded chunk
  keys = jax.random.split(jax.random.key(0), 4)
  hidden = jax.random.normal(keys[0], (2, 7, 16))
  weight = jax.random.normal(keys[1], (16, 40))
  targets = jax.random.randint(keys[2], (2, 7), 0, 40)
  mix = jax.random.normal(keys[3], (2, 2, 7))  # a loss that weighs log-probs and entropies

  def loss(hidden, weight, chunked):
    unembed = lambda x: jnp.tanh(x) @ weight  # non-linear per token, like the final norm
    if chunked:
      logp, entropy = chunked_token_log_probs(unembed, hidden, targets, chunk_len)
    else:
      logp, entropy = token_log_probs(unembed(hidden), targets)
    return jnp.sum(mix[0] * logp + mix[1] * entropy), (logp, entropy)

  grad = jax.grad(loss, argnums=(0, 1), has_aux=True)
  (full_grads, full), (chunked_grads, chunked) = grad(hidden, weight, False), grad(hidden, weight, True)
  for a, b in zip(jax.tree.leaves((full, full_grads)), jax.tree.leaves((chunked, chunked_grads))):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
