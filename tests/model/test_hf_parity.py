"""Numerical parity with transformers' Qwen3ForCausalLM (the outside reference)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402

from toolorch_jax.model import load_hf, save_hf  # noqa: E402

# Tied/untied, MHA and GQA with several group sizes, head_dim != hidden/heads, different theta.
HF_CONFIGS = {
    "tied_gqa2": dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      tie_word_embeddings=True, rope_theta=10000.0, intermediate_size=96),
    "untied_mha": dict(hidden_size=48, num_attention_heads=3, num_key_value_heads=3, head_dim=16,
                       tie_word_embeddings=False, rope_theta=1e6, intermediate_size=80),
    "untied_gqa3_wide_heads": dict(hidden_size=32, num_attention_heads=6, num_key_value_heads=2,
                                   head_dim=24, tie_word_embeddings=False, rope_theta=5e5,
                                   intermediate_size=64),
}
TOL = 1e-4


def make_hf_model(tmp_path, name, seed=0, max_shard_size=None):
  torch.manual_seed(seed)
  cfg = transformers.Qwen3Config(vocab_size=300, num_hidden_layers=3, rms_norm_eps=1e-6,
                                 max_position_embeddings=256, **HF_CONFIGS[name])
  hf = transformers.Qwen3ForCausalLM(cfg).eval()
  # Random norm weights so the q/k/layer norms are really exercised (HF initialises them to 1).
  with torch.no_grad():
    for pname, p in hf.named_parameters():
      if pname.endswith("norm.weight"):
        p.copy_(1.0 + 0.1 * torch.randn_like(p))
  out = tmp_path / f"hf_{name}"
  kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
  hf.save_pretrained(out, **kwargs)
  return hf, out


def padded_batch(rng, lengths, total, vocab):
  """Left-padded tokens, their attention mask and positions counting real tokens from 0."""
  tokens = rng.integers(0, vocab, size=(len(lengths), total)).astype(np.int32)
  mask = np.zeros((len(lengths), total), np.int32)
  for row, n in enumerate(lengths):
    mask[row, total - n:] = 1
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
  return tokens, mask, positions


def hf_logits(hf, tokens, mask, positions):
  with torch.no_grad():
    out = hf(input_ids=torch.tensor(tokens, dtype=torch.long),
             attention_mask=torch.tensor(mask, dtype=torch.long),
             position_ids=torch.tensor(positions, dtype=torch.long))
  return out.logits.float().numpy()


@pytest.mark.parametrize("layout", ["in_out", "out_in"])
@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_logits_match_transformers_on_padded_batch(tmp_path, name, layout):
  hf, path = make_hf_model(tmp_path, name)
  model, config = load_hf(path, dtype="float32", weight_layout=layout)
  assert config.tie_word_embeddings == HF_CONFIGS[name]["tie_word_embeddings"]
  assert config.weight_layout == layout
  hf_q = hf.model.layers[0].self_attn.q_proj.weight.shape  # [heads * head_dim, hidden]: [out, in]
  q = model.layers[0].attn.q_proj.get_value().shape
  assert ((q[0] * q[1], q[2]) if layout == "out_in" else (q[1] * q[2], q[0])) == tuple(hf_q)
  check_logits_match_transformers(hf, model, f"{name} {layout}")


@pytest.mark.parametrize("query_block", [1, 5, 11])
def test_causal_query_blocks_match_transformers(tmp_path, query_block):
  """Queries in blocks over the keys up to the block's end (ragged last block at 5, one block of
  11 and one of 1 query at 11, a query per block at 1) give transformers' logits."""
  hf, path = make_hf_model(tmp_path, "untied_gqa3_wide_heads")
  model, config = load_hf(path, dtype="float32", attention_query_block=query_block)
  assert config.attention_query_block == query_block
  check_logits_match_transformers(hf, model, f"query_block={query_block}")


def check_logits_match_transformers(hf, model, name):
  tokens, mask, positions = padded_batch(np.random.default_rng(1), [12, 7, 1], 12, 300)
  ours, _ = model(jnp.asarray(tokens), jnp.asarray(positions), attention_mask=jnp.asarray(mask))
  ours = np.asarray(ours)
  assert ours.dtype == np.float32 and ours.shape == (3, 12, 300)
  ref = hf_logits(hf, tokens, mask, positions)
  real = mask.astype(bool)
  diff = np.abs(ours[real] - ref[real]).max()
  print(f"PARITY {name}: max |logits - transformers| = {diff:.3e}")
  assert diff <= TOL


def test_sharded_checkpoint_with_index_loads(tmp_path):
  hf, path = make_hf_model(tmp_path, "untied_mha", max_shard_size="40KB")
  assert (path / "model.safetensors.index.json").is_file()
  model, _ = load_hf(path)
  tokens, mask, positions = padded_batch(np.random.default_rng(2), [5, 9], 9, 300)
  ours, _ = model(jnp.asarray(tokens), jnp.asarray(positions), attention_mask=jnp.asarray(mask))
  real = mask.astype(bool)
  assert np.abs(np.asarray(ours)[real] - hf_logits(hf, tokens, mask, positions)[real]).max() <= TOL


@pytest.mark.parametrize("name", ["tied_gqa2", "untied_gqa3_wide_heads"])
def test_prefill_then_cached_decode_equals_full_forward(tmp_path, name):
  hf, path = make_hf_model(tmp_path, name)
  model, _ = load_hf(path)
  total, steps = 14, 5
  tokens, mask, positions = padded_batch(np.random.default_rng(3), [14, 10, 4], total, 300)
  full, _ = model(jnp.asarray(tokens), jnp.asarray(positions), attention_mask=jnp.asarray(mask))
  prompt = total - steps
  cache = model.init_cache(batch_size=3, max_length=32)
  logits, cache = model(jnp.asarray(tokens[:, :prompt]), jnp.asarray(positions[:, :prompt]), cache,
                        attention_mask=jnp.asarray(mask[:, :prompt]))
  pieces = [np.asarray(logits)]
  for t in range(prompt, total):
    logits, cache = model(jnp.asarray(tokens[:, t:t + 1]), jnp.asarray(positions[:, t:t + 1]), cache,
                          attention_mask=jnp.asarray(mask[:, t:t + 1]))
    pieces.append(np.asarray(logits))
  incremental = np.concatenate(pieces, axis=1)
  real = mask.astype(bool)
  assert np.abs(incremental[real] - np.asarray(full)[real]).max() <= TOL
  ref = hf_logits(hf, tokens, mask, positions)
  assert np.abs(incremental[real] - ref[real]).max() <= TOL
  assert np.asarray(cache.lengths).tolist() == [total] * 3


@pytest.mark.parametrize("name,layout", [("tied_gqa2", "in_out"), ("untied_gqa3_wide_heads", "in_out"),
                                         ("untied_gqa3_wide_heads", "out_in")])
def test_save_hf_round_trips_through_transformers(tmp_path, name, layout):
  hf, path = make_hf_model(tmp_path, name)
  model, config = load_hf(path, weight_layout=layout)
  out = tmp_path / "exported"
  save_hf(model, config, out, max_shard_bytes=30_000)
  assert (out / "model.safetensors.index.json").is_file()
  reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
  tokens, mask, positions = padded_batch(np.random.default_rng(4), [8, 3], 8, 300)
  real = mask.astype(bool)
  ours, _ = model(jnp.asarray(tokens), jnp.asarray(positions), attention_mask=jnp.asarray(mask))
  theirs = hf_logits(reloaded, tokens, mask, positions)
  assert np.abs(np.asarray(ours)[real] - theirs[real]).max() <= TOL
  for (n1, p1), (n2, p2) in zip(sorted(hf.state_dict().items()), sorted(reloaded.state_dict().items())):
    assert n1 == n2
    assert torch.equal(p1, p2), n1
