"""Packing and the jitted train step: micro-batching changes nothing, GRPO moves log-probs the
way the advantage says, SFT lowers its loss."""

import jax
import numpy as np
import optax
from flax import nnx

from toolorch_jax.model import MeshConfig, create_model, load_model_config, make_mesh
from toolorch_jax.rl.batch import Sample, pack
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.train_step import TrainStep, grpo_objective, sft_objective

CONFIG = load_model_config("tiny")


def episodes(count=6, seed=0):
  rng = np.random.default_rng(seed)
  result = []
  for i in range(count):
    n = int(rng.integers(6, 20))
    ids = rng.integers(1, CONFIG.vocab_size, n)
    mask = np.zeros(n, np.int32)
    mask[n // 2:] = 1  # the second half was "generated"
    result.append(Sample(ids, mask, advantage=float(rng.normal()), logprobs=-rng.random(n)))
  return result


def test_pack_layout():
  eps = [Sample([5, 6, 7, 8], [0, 0, 1, 1], 1.5, [0, 0, -0.5, -0.25]), Sample([9, 10, 11], [0, 1, 1], -2.0)]
  batch = pack(eps, seq_len=8, rows_multiple=2)
  assert batch.tokens.shape == (2, 8) and batch.num_sequences == 2
  row = batch.tokens[0].tolist()
  assert row[:5] == [5, 6, 7, 9, 10]  # longest first, then the next that fits
  assert batch.targets[0, :5].tolist() == [6, 7, 8, 10, 11]
  assert batch.positions[0, :5].tolist() == [0, 1, 2, 0, 1]
  assert batch.segments[0, :6].tolist() == [1, 1, 1, 2, 2, 0]
  assert batch.loss_mask[0, :5].tolist() == [0, 1, 1, 1, 1]
  assert batch.advantages[0, :5].tolist() == [1.5, 1.5, 1.5, -2.0, -2.0]
  assert batch.rollout_logp[0, :3].tolist() == [0, -0.5, -0.25]
  assert batch.num_tokens == 4 and not batch.tokens[1].any()  # the second row is padding
  long = pack([Sample(list(range(1, 30)), [1] * 29)], seq_len=8)
  assert long.truncated == 1 and long.tokens.shape == (1, 8)


def run_update(objective, micro, mesh=None, lr=1e-2, old_logp=True, config=CONFIG, loss_chunk_tokens=0):
  model = create_model(config, seed=1, mesh=mesh)
  graphdef, params = nnx.split(model)
  optimizer = optax.sgd(lr)
  opt_state = optimizer.init(params)
  steps = TrainStep(graphdef, optimizer, objective, "token_mean", mesh, loss_chunk_tokens)
  batch = pack(episodes(), seq_len=24, rows_multiple=4)
  mbs = batch.micro_batches(micro)
  before = steps.log_probs(params, mbs)
  if old_logp:
    mbs["old_logp"] = before
  params, _, metrics = steps.update(params, opt_state, mbs, batch.num_tokens, batch.num_sequences)
  return params, metrics, steps, mbs, before, batch


def assert_same_leaves(left, right):
  for a, b in zip(jax.tree.leaves(left), jax.tree.leaves(right), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-7)


def test_micro_batching_gives_the_full_batch_update():
  one, m1, *_ = run_update(grpo_objective(GRPOConfig()), micro=1)
  four, m4, *_ = run_update(grpo_objective(GRPOConfig()), micro=4)
  np.testing.assert_allclose(float(m1["loss"]), float(m4["loss"]), rtol=1e-5)
  assert_same_leaves(one, four)


def test_sharded_update_matches_single_device():
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  single, *_ = run_update(grpo_objective(GRPOConfig()), micro=2)
  sharded, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, mesh=mesh)
  assert_same_leaves(single, sharded)


def test_grpo_moves_log_probs_with_the_advantage():
  params, metrics, steps, mbs, before, batch = run_update(grpo_objective(GRPOConfig()), micro=1, lr=0.05)
  after = steps.log_probs(params, mbs)
  mask = mbs["loss_mask"] > 0
  change = np.asarray(after - before)[mask]
  advantage = mbs["advantages"][mask]
  # on-policy first step: ratio 1, nothing clipped; log-probs rise where A > 0 and fall where A < 0
  assert float(metrics["clipped"]) == 0.0 and abs(float(metrics["ratio"]) - 1.0) < 1e-6
  agree = np.mean(np.sign(change) == np.sign(advantage))
  assert agree > 0.8, agree


def test_without_old_log_probs_the_update_is_the_on_policy_one():
  # one update per batch: the policy being updated is the old one, so no forward pass is needed
  given, with_old, *_ = run_update(grpo_objective(GRPOConfig()), micro=2)
  implied, without, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, old_logp=False)
  np.testing.assert_allclose(float(with_old["loss"]), float(without["loss"]), rtol=1e-5)
  assert_same_leaves(given, implied)


def sft_steps(optimizer, seed):
  """(params, optimizer state, TrainStep) of a fresh tiny model under the SFT objective."""
  graphdef, params = nnx.split(create_model(CONFIG, seed=seed))
  return params, optimizer.init(params), TrainStep(graphdef, optimizer, sft_objective)


def test_sft_lowers_its_loss():
  params, opt_state, steps = sft_steps(optax.adam(1e-2), seed=2)
  batch = pack(episodes(seed=3), seq_len=24, rows_multiple=2)
  mbs = batch.micro_batches(2)
  losses = []
  for _ in range(15):
    params, opt_state, metrics = steps.update(params, opt_state, mbs, batch.num_tokens, batch.num_sequences)
    losses.append(float(metrics["loss"]))
  assert losses[-1] < 0.5 * losses[0]


def test_entropy_bonus_enters_the_loss():
  _, plain, *_ = run_update(grpo_objective(GRPOConfig()), micro=1)
  _, bonus, *_ = run_update(grpo_objective(GRPOConfig(entropy_coef=0.1)), micro=1)
  np.testing.assert_allclose(float(bonus["loss"]), float(plain["loss"]) - 0.1 * float(plain["entropy"]),
                             rtol=1e-5)


def test_chunked_loss_gives_the_full_logits_update():
  # tied embeddings (the gradient reaches the table from both ends); 2 rows per micro-batch, 10
  # tokens a chunk: 5 positions of 24, the last chunk ragged (4). The mesh test below is untied.
  config = CONFIG.replace(tie_word_embeddings=True)
  objective = grpo_objective(GRPOConfig(entropy_coef=0.1))  # the entropy's gradient too
  full, m_full, steps_full, mbs, before_full, _ = run_update(objective, micro=2, lr=1.0, config=config)
  chunked, m_chunked, steps_chunked, _, before_chunked, _ = run_update(
      objective, micro=2, lr=1.0, config=config, loss_chunk_tokens=10)
  np.testing.assert_allclose(np.asarray(before_chunked), np.asarray(before_full), rtol=1e-6, atol=1e-6)
  for name in m_full:
    np.testing.assert_allclose(float(m_chunked[name]), float(m_full[name]), rtol=1e-6, atol=1e-7)
  # with SGD at lr 1 each parameter moved by its gradient
  for a, b in zip(jax.tree.leaves(full), jax.tree.leaves(chunked), strict=True):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-7)


def test_chunked_loss_on_a_mesh_matches_single_device():
  mesh = make_mesh(MeshConfig(data=2, fsdp=2, tensor=2))
  single, *_ = run_update(grpo_objective(GRPOConfig()), micro=2)
  sharded, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, mesh=mesh, loss_chunk_tokens=16)
  assert_same_leaves(single, sharded)


def test_a_new_micro_batch_count_compiles_nothing_new():
  # batches pack into varying row counts; only the micro-batch shape may decide what is compiled
  params, opt_state, steps = sft_steps(optax.sgd(1e-2), seed=1)
  counts = []
  for count in (4, 12):
    batch = pack(episodes(count), seq_len=24, rows_multiple=2)
    counts.append(batch.tokens.shape[0] // 2)
    params, opt_state, _ = steps.update(params, opt_state, batch.micro_batches(counts[-1]),
                                        batch.num_tokens, batch.num_sequences)
  assert counts[0] != counts[1]
  # (only the program that slices micro-batch i out of the placed batch is per count)
  assert [f._cache_size() for f in (steps._zeros, steps._accumulate, steps._apply)] == [1, 1, 1]
  assert steps._micro._cache_size() == 2
