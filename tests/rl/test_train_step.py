"""Packing (every shared prefix once) and the jitted train step: sharing and micro-batching change
nothing, GRPO moves log-probs the way the advantage says, SFT lowers its loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from toolorch_jax.config import ConfigError
from toolorch_jax.model import MeshConfig, create_model, load_model_config, make_mesh
from toolorch_jax.rl.batch import Sample, micro_batch_rows, pack
from toolorch_jax.rl.config import TrainSection
from toolorch_jax.rl.grpo import GRPOConfig
from toolorch_jax.rl.train_step import (CPU_COMPILER_OPTIONS, XLA_OWN_YNN_FUSIONS, OptimConfig,
                                        TrainStep, build_optimizer, grpo_objective, sft_objective,
                                        step_compiler_options)

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
  assert batch.tokens[0, :5].tolist() == [5, 6, 7, 9, 10]  # sorted, both in the first row
  assert batch.positions[0, :5].tolist() == [0, 1, 2, 0, 1]
  assert batch.subtree_ends[0].tolist() == [2, 2, 2, 4, 4, -1, -1, -1]  # two trees, no sharing
  # logits are read at the columns before each policy token: 7, 8 of the first, 10, 11 of the second
  assert batch.loss_columns[0].tolist() == [1, 2, 3, 4] and batch.targets[0].tolist() == [7, 8, 10, 11]
  assert batch.entry_index[0].tolist() == [0, 1, 2, 3]
  assert batch.advantages[0].tolist() == [1.5, 1.5, -2.0, -2.0]
  assert batch.rollout_logp[0].tolist() == [-0.5, -0.25, 0.0, 0.0]
  assert batch.sequence_ids[0].tolist() == [1, 1, 2, 2]
  assert batch.num_tokens == 4 and not batch.tokens[1].any() and not batch.loss_mask[1].any()
  long = pack([Sample(list(range(1, 30)), [1] * 29)], seq_len=8)
  assert long.truncated == 1 and long.tokens.shape == (1, 8)


def test_shared_prefixes_are_packed_once():
  # a group: one prompt [1, 2, 3], two episodes that agree on their first policy tokens, one not
  prompt = [1, 2, 3]
  eps = [Sample(prompt + [7, 8, 9], [0, 0, 0, 1, 1, 1], 1.0),
         Sample(prompt + [7, 8, 4, 5], [0, 0, 0, 1, 1, 1, 1], -1.0),
         Sample(prompt + [6], [0, 0, 0, 1], 0.5)]
  batch = pack(eps, seq_len=16)
  # inputs (each sample but its last token), sorted: [1 2 3], [1 2 3 7 8], [1 2 3 7 8 4]: one path
  assert batch.tokens[0, :7].tolist() == [1, 2, 3, 7, 8, 4, 0]
  assert batch.positions[0, :6].tolist() == [0, 1, 2, 3, 4, 5]
  assert batch.subtree_ends[0, :7].tolist() == [5, 5, 5, 5, 5, 5, -1]
  assert (batch.sample_tokens, batch.packed_tokens) == (3 + 5 + 6, 6)
  # column 2 (token 3) is read with two targets (6 and 7), column 4 with 9 and 4; each distinct
  # (column, target) once, each episode's entries with its own advantage
  targets = [(int(c), int(t)) for c, t in zip(batch.loss_columns[0], batch.targets[0])][:6]
  assert sorted(targets) == [(2, 6), (2, 7), (3, 8), (4, 4), (4, 9), (5, 5)]
  assert batch.loss_columns.shape[1] == 8 and batch.num_tokens == 1 + 3 + 4
  read = [targets[i] for i in batch.entry_index[0][:8]]
  assert read == [(2, 6), (2, 7), (3, 8), (4, 9), (2, 7), (3, 8), (4, 4), (5, 5)]
  assert batch.advantages[0].tolist() == [0.5] + [1.0] * 3 + [-1.0] * 4
  assert batch.sequence_ids[0].tolist() == [1, 2, 2, 2, 3, 3, 3, 3]
  unshared = pack(eps, seq_len=16, share_prefixes=False)
  assert unshared.packed_tokens == unshared.sample_tokens == 14 and unshared.num_tokens == 8
  assert unshared.subtree_ends[0, :14].tolist() == [5] * 6 + [10] * 5 + [13] * 3  # longest first


def test_micro_batches_take_the_size_that_pads_little():
  assert [micro_batch_rows(r, 16) for r in (15, 16, 17, 24, 33, 64)] == [16, 16, 2, 8, 4, 16]
  assert micro_batch_rows(5, 12) == 6 and micro_batch_rows(9, 12) == 3  # halvings of 12
  # one padded row is always taken: fewer sizes to compile, no micro-batches of one row
  assert micro_batch_rows(7, 16) == 8 and [micro_batch_rows(r, 2) for r in (1, 3, 5, 7)] == [2] * 4
  assert micro_batch_rows(17, 16, least=4) == 4 and micro_batch_rows(3, 16, least=8) == 8
  batch = pack(episodes(), seq_len=24)
  padded = batch.padded(4)
  assert padded.tokens.shape[0] % 4 == 0 and padded.tokens.shape[0] > batch.tokens.shape[0]
  extra = slice(batch.tokens.shape[0], None)
  assert (padded.subtree_ends[extra] == -1).all() and not padded.loss_mask[extra].any()
  assert padded.num_tokens == batch.num_tokens == int(padded.loss_mask.sum())


def test_prefix_trees_give_every_sample_its_own_logits():
  model = create_model(CONFIG, seed=3)
  rng = np.random.default_rng(4)
  prompt = rng.integers(1, CONFIG.vocab_size, 9).tolist()
  turn = rng.integers(1, CONFIG.vocab_size, 4).tolist()
  eps = [Sample(prompt + turn + rng.integers(1, CONFIG.vocab_size, n).tolist(), [1] * (13 + n))
         for n in (3, 5, 2)] + [Sample(prompt + rng.integers(1, CONFIG.vocab_size, 6).tolist(), [1] * 15)]
  batch = pack(eps, seq_len=32)
  assert batch.packed_tokens < batch.sample_tokens
  logits, _ = model(jnp.asarray(batch.tokens), jnp.asarray(batch.positions),
                    subtree_ends=jnp.asarray(batch.subtree_ends))
  logp = jax.nn.log_softmax(logits, axis=-1)
  read = np.asarray(logp[0, batch.loss_columns[0], batch.targets[0]])[batch.entry_index[0]]
  entries = batch.loss_mask[0] > 0
  # each sample alone (right-padded into one batch: causal attention never reads the padding)
  ordered = sorted(eps, key=lambda s: list(s.ids[:-1]))  # the packer's order
  width = max(len(s.ids) for s in ordered)
  ids = np.zeros((len(ordered), width), np.int32)
  for i, s in enumerate(ordered):
    ids[i, :len(s.ids)] = s.ids
  own, _ = model(jnp.asarray(ids[:, :-1]), jnp.broadcast_to(jnp.arange(width - 1), (len(ordered), width - 1)))
  own = np.asarray(jax.nn.log_softmax(own, axis=-1))
  alone = [own[i, t, ids[i, t + 1]] for i, s in enumerate(ordered) for t in range(len(s.ids) - 1)]
  np.testing.assert_allclose(np.sort(read[entries]), np.sort(alone), rtol=1e-5, atol=1e-5)
  # and entry by entry, in each sample's order
  by_sequence = [read[entries][batch.sequence_ids[0][entries] == k] for k in range(1, 5)]
  np.testing.assert_allclose(np.concatenate(by_sequence), alone, rtol=1e-5, atol=1e-5)


def grouped_episodes(groups=3, size=4, seed=5):
  """Groups of episodes that share their prompt and some of their first policy tokens."""
  rng = np.random.default_rng(seed)
  result = []
  for _ in range(groups):
    prompt = rng.integers(1, CONFIG.vocab_size, int(rng.integers(4, 9))).tolist()
    first = rng.integers(1, CONFIG.vocab_size, 3).tolist()
    for _ in range(size):
      rest = rng.integers(1, CONFIG.vocab_size, int(rng.integers(2, 6))).tolist()
      ids = prompt + (first if rng.random() < 0.7 else []) + rest
      mask = [0] * len(prompt) + [1] * (len(ids) - len(prompt))
      result.append(Sample(ids, mask, advantage=float(rng.normal()), logprobs=-rng.random(len(ids))))
  return result


def run_update(objective, micro, mesh=None, lr=1e-2, old_logp=True, config=CONFIG, loss_chunk_tokens=0,
               samples=None, share_prefixes=True, aggregation="token_mean", ref=False,
               least_widths=(1, 1), compiler_options=None):
  model = create_model(config, seed=1, mesh=mesh)
  graphdef, params = nnx.split(model)
  optimizer = optax.sgd(lr)
  opt_state = optimizer.init(params)
  steps = TrainStep(graphdef, optimizer, objective, aggregation, mesh, loss_chunk_tokens,
                    compiler_options)
  batch = pack(episodes() if samples is None else samples, seq_len=24, rows_multiple=4,
               share_prefixes=share_prefixes, least_widths=least_widths)
  mbs = batch.micro_batches(micro)
  before = steps.log_probs(params, mbs)
  if old_logp:
    mbs["old_logp"] = before
  if ref:  # another model as the reference, so the KL term has a gradient
    mbs["ref_logp"] = steps.log_probs(nnx.split(create_model(config, seed=2, mesh=mesh))[1], mbs)
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


def test_wider_loss_arrays_give_the_same_update():
  # a trainer keeps the widest loss arrays it has compiled for; the padding must change nothing
  objective = grpo_objective(GRPOConfig(kl_coef=0.1, tis_cap=2.0))
  narrow, m_narrow, *_, batch = run_update(objective, micro=2, ref=True)
  wide, m_wide, *_, wide_batch = run_update(objective, micro=2, ref=True, least_widths=(64, 128))
  assert batch.loss_columns.shape[1] < 64 and batch.entry_index.shape[1] < 128
  assert (wide_batch.loss_columns.shape[1], wide_batch.entry_index.shape[1]) == (64, 128)
  np.testing.assert_allclose(float(m_narrow["loss"]), float(m_wide["loss"]), rtol=1e-6)
  assert_same_leaves(narrow, wide)


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean"])
def test_shared_prefixes_give_the_unshared_update(aggregation):
  # old log-probs given (the clipped ratio), KL to a reference and TIS: each entry keeps its own
  objective = grpo_objective(GRPOConfig(kl_coef=0.1, tis_cap=2.0, aggregation=aggregation))
  samples = grouped_episodes()
  shared, m_shared, *_, batch = run_update(objective, micro=2, samples=samples, lr=0.5,
                                           aggregation=aggregation, ref=True)
  assert batch.packed_tokens < 0.8 * batch.sample_tokens
  alone, m_alone, *_ = run_update(objective, micro=2, samples=samples, lr=0.5,
                                  share_prefixes=False, aggregation=aggregation, ref=True)
  np.testing.assert_allclose(float(m_shared["loss"]), float(m_alone["loss"]), rtol=1e-5)
  assert_same_leaves(shared, alone)


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


def test_causal_query_blocks_give_the_whole_product_update():
  # prefix trees (shared prompts and first turns) in rows of 24: blocks of 5 queries, the last
  # ragged (4); old log-probs, KL to a reference and TIS, so every term reads the blocked pass
  objective = grpo_objective(GRPOConfig(kl_coef=0.1, tis_cap=2.0))
  samples = grouped_episodes()
  whole, m_whole, _, _, before_whole, _ = run_update(objective, micro=2, lr=1.0, samples=samples,
                                                     ref=True)
  blocked, m_blocked, _, mbs, before_blocked, _ = run_update(
      objective, micro=2, lr=1.0, samples=samples, ref=True,
      config=CONFIG.replace(attention_query_block=5))
  np.testing.assert_allclose(np.asarray(before_blocked), np.asarray(before_whole), rtol=1e-6, atol=1e-6)
  for name in m_whole:
    np.testing.assert_allclose(float(m_blocked[name]), float(m_whole[name]), rtol=1e-5, atol=1e-7)
  assert_same_leaves(blocked, whole)
  # and the blocks skip work: of each row's 24 x 24 scores, the blocks' 5 x 5 + 5 x 10 + ... + 4 x 24
  # = 346; XLA counts at least the two products' FLOPs of the other 230 fewer
  def flops(config):
    model = create_model(config, seed=1)
    forward = jax.jit(lambda t, p: model.hidden_states(t, p)[0])
    return forward.lower(mbs["tokens"][0], mbs["positions"][0]).cost_analysis()["flops"]
  rows = mbs["tokens"].shape[1]
  skipped = 2 * 2 * rows * CONFIG.num_heads * CONFIG.head_dim * (24 * 24 - 346) * CONFIG.num_layers
  assert flops(CONFIG) - flops(CONFIG.replace(attention_query_block=5)) >= skipped


def test_compiler_options_reach_every_program_of_the_train_step(tmp_path):
  # an option with an effect on any backend: XLA writes the HLO of each program it compiles
  run_update(grpo_objective(GRPOConfig()), micro=2, compiler_options={
      "xla_dump_to": str(tmp_path), "xla_dump_hlo_as_text": True})
  dumped = " ".join(path.name for path in tmp_path.iterdir())
  for program in ("accumulate", "apply", "zeros", "_lambda"):  # _lambda: log-probs, a micro-batch
    assert f"jit_{program}" in dumped, (program, dumped[:500])


def test_the_cpu_default_ynn_dot_fusions_give_the_update_up_to_rounding():
  # CPU_COMPILER_OPTIONS fuse each dot with its elementwise neighbours (YNNPACK): the update moves by
  # rounding only, against XLA's own fusion list
  own = {"xla_cpu_experimental_ynn_fusion_type": XLA_OWN_YNN_FUSIONS}
  fused, m_fused, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, lr=1.0)
  plain, m_plain, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, lr=1.0,
                                  compiler_options=own)
  np.testing.assert_allclose(float(m_fused["loss"]), float(m_plain["loss"]), rtol=1e-5)
  assert_same_leaves(plain, fused)


def test_xla_own_ynn_fusion_list_is_its_unset_default():
  # the way back that rl/config.py documents is XLA's own choice: the same program as no option,
  # while the CPU default changes it (a dot followed by elementwise ops)
  def program(options):
    step = jax.jit(lambda w, x: (x @ w) * x + 1.0, compiler_options=options or None)
    text = step.lower(jnp.ones((64, 64)), jnp.ones((64, 64))).compile().as_text()
    return text[text.index("\n%"):]  # past the module header, which names the options' hash
  unset = program({})
  own = {"xla_cpu_experimental_ynn_fusion_type": XLA_OWN_YNN_FUSIONS}
  assert program(own) == unset
  assert program(CPU_COMPILER_OPTIONS) != unset


def test_the_cpu_default_scheduler_gives_the_update_to_the_bit():
  # CPU_COMPILER_OPTIONS is on by default because it moves no bit of the update (bench/README.md)
  assert step_compiler_options(None, "cpu") == CPU_COMPILER_OPTIONS
  assert step_compiler_options(None, "tpu") is None
  chosen = {"xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_DEFAULT"}
  assert step_compiler_options(chosen, "cpu") == {**CPU_COMPILER_OPTIONS, **chosen}
  tuned, m_tuned, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, lr=1.0)
  plain, m_plain, *_ = run_update(grpo_objective(GRPOConfig()), micro=2, lr=1.0,
                                  compiler_options=chosen)
  assert float(m_tuned["loss"]) == float(m_plain["loss"])
  for a, b in zip(jax.tree.leaves(tuned), jax.tree.leaves(plain), strict=True):
    assert np.array_equal(np.asarray(a), np.asarray(b))


def test_an_unknown_compiler_option_names_the_config_key():
  graphdef, _ = nnx.split(create_model(CONFIG, seed=0))
  with pytest.raises(ConfigError, match=r"train\.compiler_options: .*xla_no_such_option"):
    TrainStep(graphdef, optax.sgd(1.0), sft_objective, compiler_options={"xla_no_such_option": 1})
  with pytest.raises(ConfigError, match=r"train\.compiler_options: .*not a valid enum value"):
    TrainStep(graphdef, optax.sgd(1.0), sft_objective,
              compiler_options={"xla_cpu_experimental_ynn_fusion_type": "dot"})
  with pytest.raises(ConfigError, match=r"train\.compiler_options\.xla_dump_to must be a string"):
    TrainSection(compiler_options={"xla_dump_to": {"path": "x"}})


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


@pytest.mark.parametrize("warmup", [0, 3])
def test_the_learning_rate_rises_over_the_warmup_then_follows_a_cosine_to_zero(warmup):
  """Adam's step on a constant gradient is the rate itself, so the steps read the schedule:
  linear from 0 over the warmup, then lr * (1 + cos(pi * t / T)) / 2 (SGDR without restarts)."""
  rate, decay = 0.1, 8
  optimizer = build_optimizer(OptimConfig(learning_rate=rate, weight_decay=0.0, warmup_steps=warmup,
                                          decay_steps=decay))
  params = jnp.zeros(())
  state = optimizer.init(params)
  steps = []
  for _ in range(warmup + decay + 2):
    updates, state = optimizer.update(jnp.array(0.5), state, params)
    steps.append(-float(updates))
  expected = [rate * t / warmup for t in range(warmup)]
  expected += [rate * (1 + np.cos(np.pi * min(t, decay) / decay)) / 2 for t in range(decay + 2)]
  np.testing.assert_allclose(steps, expected, atol=1e-6)
  with pytest.raises(ConfigError, match="optim.decay_steps must be >= 0, got -1"):
    OptimConfig(decay_steps=-1)
