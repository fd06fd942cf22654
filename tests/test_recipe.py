"""configs/orchestra-8b.yaml holds ToolOrchestra's recipe, its clusters pick the training mesh,
and `toolorch plan --config` prints each cluster's train-step and KV-cache memory."""

import pytest

from toolorch_jax import cli
from toolorch_jax.config import ConfigError, config_dir, load_config
from toolorch_jax.model import MeshConfig, load_model_config
from toolorch_jax.model.plan import plan_kv_cache
from toolorch_jax.rl.config import RunConfig

RECIPE = config_dir() / "orchestra-8b.yaml"


def test_the_recipe_is_toolorchestras():
  run = load_config(RunConfig, RECIPE)
  assert (run.model.preset, run.model.init_from) == ("qwen3-8b", "hf/Qwen3-8B")
  assert load_model_config(run.model.preset).num_params > 8e9
  assert (run.rollout.group_size, run.rollout.tasks_per_step, run.rollout.temperature) == (8, 16, 1.0)
  assert run.rollout.max_turns == 30 and run.rollout.slots == 8 * 16
  assert run.optim.learning_rate == 1e-6
  assert (run.grpo.clip_low, run.grpo.clip_high, run.grpo.dual_clip, run.grpo.kl_coef) == (
      0.2, 0.28, 10.0, 1e-4)
  assert run.grpo.kl_estimator == "mse"
  assert [c.name for c in run.rewards.components] == ["outcome", "preference"]
  assert (run.env.name, run.env.settings["toolset"]) == ("qa", "toolorchestra")
  assert sorted(run.clusters) == ["h100-2x8", "tpu-v5p-64"]
  assert run.clusters["tpu-v5p-64"].mesh.num_devices == 32
  assert run.clusters["h100-2x8"].mesh.num_devices == 16


def test_the_weights_directory_comes_from_the_environment(monkeypatch):
  monkeypatch.setenv("QWEN3_8B_DIR", "/models/Qwen3-8B")
  run = load_config(RunConfig, RECIPE)
  assert run.model.init_from == run.model.tokenizer == "/models/Qwen3-8B"


def test_a_cluster_picks_the_mesh_and_an_unknown_one_is_named():
  run = load_config(RunConfig, RECIPE, ["cluster=h100-2x8"])
  assert run.mesh == MeshConfig(data=2, fsdp=4, tensor=2)
  with pytest.raises(ConfigError, match="cluster: 'a100' is not one of clusters"):
    load_config(RunConfig, RECIPE, ["cluster=a100"])


def test_kv_cache_plan_is_the_engines_layout():
  config = load_model_config("tiny")  # 2 KV heads
  plan = plan_kv_cache(config, MeshConfig(data=2, fsdp=2, tensor=2), slots=8, max_length=64)
  per_layer = (8 // 4) * 64 * (config.num_kv_heads // 2) * config.head_dim * 4  # float32
  bookkeeping = 8 * 64 + 4 * 8 * (config.vocab_size + 4)
  assert plan.cache_bytes == 2 * config.num_layers * per_layer + bookkeeping


def test_plan_config_prints_every_cluster(tmp_path, capsys):
  recipe = tmp_path / "recipe.yaml"
  recipe.write_text(
      "model: {preset: tiny}\n"
      "rollout: {slots: 8, max_context: 64}\n"
      "train: {seq_len: 64, micro_batch_rows: 4}\n"
      "clusters:\n"
      "  big: {mesh: {data: 1, fsdp: 8, tensor: 1}, hbm_gib: 1, description: eight chips}\n"
      "  small: {mesh: {data: 2, fsdp: 2, tensor: 2}, hbm_gib: 0.001}\n")
  assert cli.main(["plan", "--config", str(recipe)]) == 0
  out = capsys.readouterr().out
  assert "cluster big (eight chips)" in out and "cluster small" in out
  assert "micro-batch 4 x 64 tokens" in out and "KV cache (8 slots x 64 tok)" in out
  big, small = out.split("cluster small")
  assert "FITS in 1 GiB per device" in big and "DOES NOT FIT in" in small
