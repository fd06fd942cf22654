"""The toolorch command: help everywhere, plan and convert end to end."""

import subprocess
import sys

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file

from toolorch_jax import cli
from toolorch_jax.checkpoint import load_model
from toolorch_jax.model import MeshConfig, create_model, load_model_config, save_hf
from toolorch_jax.model.plan import plan_memory

SUBCOMMANDS = [["plan"], ["convert"], ["tokenizer"], ["tokenizer", "train"], ["tokenizer", "encode"]]


@pytest.mark.parametrize("argv", [["--help"]] + [name + ["--help"] for name in SUBCOMMANDS])
def test_help(argv, capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(argv)
  assert exit_info.value.code == 0
  assert "usage: toolorch" in capsys.readouterr().out


def test_plan_command_runs_in_fresh_process_with_its_own_fake_devices():
  out = subprocess.run(
      [sys.executable, "-m", "toolorch_jax.cli", "plan", "--model", "tiny", "--mesh",
       "data=2,fsdp=4,tensor=2", "--hbm-gib", "1", "--seq-len", "64"],
      capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
  assert "mesh data=2 fsdp=4 tensor=2 (16 devices); global batch 8 x 64 tokens" in out
  for label in ("parameters", "optimizer state", "gradients", "activations", "peak"):
    assert label in out
  assert "FITS in 1 GiB per device" in out


def test_plan_errors_are_clear():
  assert cli.main(["plan", "--model", "tiny", "--mesh", "fsdp=-1"]) == 2
  assert cli.main(["plan", "--model", "missing-preset"]) == 2


def test_plan_figures_agree_with_shard_sizes_and_xla():
  config = load_model_config("tiny")
  plan = plan_memory(config, MeshConfig(fsdp=8), model_name="tiny", batch=8, seq_len=32, hbm_gib=1)
  norms = config.hidden_size * (2 * config.num_layers + 1) + 2 * config.head_dim * config.num_layers
  expected_params = ((config.num_params - norms) // 8 + norms) * 4  # norms are replicated
  assert plan.params_bytes == expected_params
  assert plan.optimizer_bytes == 2 * expected_params + 4  # mu, nu and the step count
  # XLA's own argument size is exactly what the shard sizes add up to.
  assert plan.argument_bytes == plan.params_bytes + plan.optimizer_bytes + plan.batch_bytes
  assert plan.fits


def test_plan_sees_rematerialisation_save_memory():
  config = load_model_config("small")
  run = lambda remat: plan_memory(config.replace(remat=remat), MeshConfig(fsdp=8), model_name="small",
                                  batch=8, seq_len=512, hbm_gib=80)
  assert run("full").activation_bytes < 0.7 * run("none").activation_bytes


def test_plan_sees_causal_query_blocks_save_memory():
  config = load_model_config("small")
  run = lambda block: plan_memory(config.replace(attention_query_block=block), MeshConfig(fsdp=8),
                                  model_name="small", batch=8, seq_len=512, hbm_gib=80)
  dense, blocked = run(0), run(64)
  assert blocked.activation_bytes < 0.85 * dense.activation_bytes  # 0.80 measured
  assert "remat=none, attention_query_block=64;" in blocked.render()
  assert "remat=none;" in dense.render()


def test_plan_qwen3_8b_on_fsdp8():
  plan = plan_memory(load_model_config("qwen3-8b"), MeshConfig(fsdp=8), model_name="qwen3-8b",
                     batch=8, seq_len=4096, hbm_gib=80)
  assert abs(plan.params_bytes - 8.19e9 * 2 / 8) < 0.05e9  # bf16 weights split 8 ways
  assert plan.fits and plan.peak_bytes > plan.params_bytes + plan.optimizer_bytes


def test_convert_hf_orbax_hf_round_trip(tmp_path):
  config = load_model_config("tiny")
  save_hf(create_model(config, seed=5), config, tmp_path / "hf")
  assert cli.main(["convert", str(tmp_path / "hf"), str(tmp_path / "ckpt"), "--to", "orbax"]) == 0
  assert cli.main(["convert", str(tmp_path / "ckpt"), str(tmp_path / "hf2"), "--to", "hf"]) == 0
  before = load_file(tmp_path / "hf" / "model.safetensors")
  after = load_file(tmp_path / "hf2" / "model.safetensors")
  assert before.keys() == after.keys()
  for name in before:
    np.testing.assert_array_equal(before[name], after[name], err_msg=name)

  assert cli.main(["convert", str(tmp_path / "hf"), str(tmp_path / "bf16"), "--to", "orbax",
                   "--dtype", "bfloat16"]) == 0
  model, restored = load_model(str(tmp_path / "bf16"))
  assert restored.param_dtype == "bfloat16" and model.embedding[...].dtype == jax.numpy.bfloat16


def test_convert_rejects_unknown_source(tmp_path):
  assert cli.main(["convert", str(tmp_path), str(tmp_path / "out"), "--to", "hf"]) == 2
