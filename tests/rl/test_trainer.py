"""`toolorch train` on the tiny model with a scripted environment: it learns, logs, checkpoints,
and a run killed with SIGKILL resumes to bit-identical parameters, with rollouts in step with the
update or one step ahead of it."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")

from tests.checkpoint_params import final_params  # noqa: E402
from tests.rl.guess_env import write_guess_run  # noqa: E402
from toolorch_jax.checkpoint import TrainCheckpointer  # noqa: E402
from toolorch_jax.config import ConfigError, load_config  # noqa: E402
from toolorch_jax.rl.config import RunConfig  # noqa: E402
from toolorch_jax.rl.pipeline import start_rollout, train_on_engines  # noqa: E402
from toolorch_jax.rl.trainer import Trainer  # noqa: E402

EXPECTED_METRICS = {
    "reward/mean", "reward/outcome", "accuracy", "cost_usd", "latency_s", "turns", "policy_version",
    "train/loss", "train/kl", "train/entropy", "train/clip_fraction", "train/grad_norm",
    "train/tokens_per_s", "rollout/tokens_per_s", "step_seconds", "filtered/low_std",
    "finish/env", "train/kept_episodes"}


@pytest.fixture(scope="module")
def run_yaml(tmp_path_factory):
  return write_guess_run(tmp_path_factory.mktemp("trainer"), "steps: 3, seq_len: 96,"
                         " micro_batch_rows: 2, keep_checkpoints: 2, progress: false")


def test_a_few_steps_learn_log_and_checkpoint(run_yaml, tmp_path):
  config = load_config(RunConfig, run_yaml)
  trainer = Trainer(config, tmp_path)
  before = [np.asarray(x).copy() for x in jax.tree.leaves(trainer.learner.params)]
  with contextlib.closing(start_rollout(config, trainer)) as rollout:
    trainer.run(rollout)
    assert rollout.engine.version == 3  # the rollout serves the last update
  after = [np.asarray(x) for x in jax.tree.leaves(trainer.learner.params)]
  assert any(not np.array_equal(a, b) for a, b in zip(before, after))
  lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [line["step"] for line in lines] == [1, 2, 3]
  for line in lines:
    assert EXPECTED_METRICS <= set(line), EXPECTED_METRICS - set(line)
  assert lines[-1]["policy_version"] == 3.0
  checkpoints = TrainCheckpointer(str(tmp_path / "checkpoints"))
  assert checkpoints.all_steps() == [2, 3]  # keep 2
  # the loss arrays' widths go into the checkpoint and come back on resume
  widths = trainer.learner.loss_widths
  assert min(widths) > 1 and checkpoints.restore().extra["loss_widths"] == list(widths)
  assert Trainer(config, tmp_path).learner.loss_widths == widths
  assert any((tmp_path / "tensorboard").iterdir())
  assert (tmp_path / "config.yaml").read_text().startswith("model:")


def _run_one_step_ahead(run_yaml, workdir, engines):
  config = load_config(RunConfig, run_yaml, ["grpo.max_staleness=1", f"rollout.engines={engines}"])
  trainer = Trainer(config, workdir)
  with contextlib.closing(start_rollout(config, trainer)) as rollout:
    train_on_engines(config, trainer, rollout)
    assert rollout.engine.version == 3  # the rollout serves the last update
  lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  # step j's episodes are played by version max(0, j - 2): the trainer starts step j at j - 1
  assert [line["rollout/staleness"] for line in lines] == [0.0, 1.0, 1.0]
  assert all(line["filtered/stale"] == 0.0 and "train/loss" in line for line in lines)
  with TrainCheckpointer(str(workdir / "checkpoints")) as checkpointer:
    played_ahead = checkpointer.restore(2).data_state["played_ahead"]
  assert [[t["policy_versions"] for t in batch["episodes"]] for batch in played_ahead] == [[[1]] * 8]
  return final_params(str(workdir / "checkpoints"), 3)


def test_rollouts_one_step_ahead_follow_the_version_rule_on_one_engine_or_two(run_yaml, tmp_path):
  one_engine = _run_one_step_ahead(run_yaml, tmp_path / "one", 1)
  # on two engines step j + 1's batch starts while step j's still plays; they are the same batches
  two_engines = _run_one_step_ahead(run_yaml, tmp_path / "two", 2)
  assert one_engine and one_engine.keys() == two_engines.keys()
  for name, value in one_engine.items():
    assert np.array_equal(value, two_engines[name]), name


def test_more_engines_than_batches_at_once_is_an_error(run_yaml):
  with pytest.raises(ConfigError, match="rollout.engines=3 needs grpo.max_staleness >= 2"):
    load_config(RunConfig, run_yaml, ["grpo.max_staleness=1", "rollout.engines=3"])


def _train(run_yaml, workdir, steps, *overrides):
  return subprocess.Popen(
      [sys.executable, "-m", "toolorch_jax.cli", "train", "--config", str(run_yaml), "--workdir",
       str(workdir), f"train.steps={steps}", "train.keep_checkpoints=10", *overrides],
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
      env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"})


def _straight_run(run_yaml, workdir, *overrides) -> dict[str, np.ndarray]:
  """The final parameters of an uninterrupted 4-step run."""
  straight = _train(run_yaml, workdir, 4, *overrides)
  assert straight.wait(timeout=300) == 0, straight.stderr.read()
  return final_params(str(workdir / "checkpoints"), 4)


def _kill_then_resume_matches(straight_params, run_yaml, tmp_path, *overrides):
  killed = _train(run_yaml, tmp_path / "killed", 4, *overrides)
  marker = tmp_path / "killed" / "checkpoints" / "2"
  deadline = time.time() + 300
  while not marker.is_dir() and time.time() < deadline and killed.poll() is None:
    time.sleep(0.05)
  assert marker.is_dir(), "no checkpoint of step 2 appeared"
  killed.send_signal(signal.SIGKILL)
  killed.wait()
  steps_left = TrainCheckpointer(str(tmp_path / "killed" / "checkpoints")).all_steps()
  assert steps_left and steps_left[-1] < 4  # really interrupted before the end
  resumed = _train(run_yaml, tmp_path / "killed", 4, *overrides)
  assert resumed.wait(timeout=300) == 0, resumed.stderr.read()

  killed_params = final_params(str(tmp_path / "killed" / "checkpoints"), 4)
  assert straight_params and straight_params.keys() == killed_params.keys()
  for name, value in straight_params.items():
    assert value.dtype == killed_params[name].dtype and np.array_equal(value, killed_params[name]), name


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical(run_yaml, tmp_path):
  _kill_then_resume_matches(_straight_run(run_yaml, tmp_path / "straight"), run_yaml, tmp_path)


ONE_STEP_AHEAD = ("grpo.max_staleness=1",)


@pytest.fixture(scope="module")
def straight_one_step_ahead(run_yaml, tmp_path_factory):
  """One straight run serves both engine counts: one engine and two train on the same batches to
  the same bits (test_rollouts_one_step_ahead_follow_the_version_rule_on_one_engine_or_two)."""
  return _straight_run(run_yaml, tmp_path_factory.mktemp("straight_ahead"), *ONE_STEP_AHEAD)


@pytest.mark.slow
@pytest.mark.parametrize("engines", [1, 2])
def test_sigkill_then_resume_with_rollouts_ahead_is_bit_identical(
    straight_one_step_ahead, run_yaml, tmp_path, engines):
  # the checkpoint holds the episodes already played for the next step; the resumed run trains on
  # them and plays the step after on the checkpoint's weights, as the straight run did (with two
  # engines, that batch was still playing when the run was killed)
  _kill_then_resume_matches(straight_one_step_ahead, run_yaml, tmp_path, *ONE_STEP_AHEAD,
                            f"rollout.engines={engines}")
