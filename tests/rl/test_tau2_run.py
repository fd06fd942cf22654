"""`toolorch train --config configs/tau2_mock.yaml`, shortened: every stage of the pipeline runs on
a τ² domain, an environment with no preference profiles and no baselines."""

import json

import pytest

pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")

from toolorch_jax import cli  # noqa: E402
from toolorch_jax.config import config_dir  # noqa: E402

SHORT = ["train.steps=2", "warmstart.steps=3", "warmstart.demonstrations=16",
         "rollout.tasks_per_step=2", "rollout.group_size=4", "report.samples=1",
         "train.progress=false", "train.tensorboard=false"]


def test_short_tau2_mock_run_writes_the_report(tmp_path):
  assert cli.main(["train", "--config", str(config_dir() / "tau2_mock.yaml"), "--workdir",
                   str(tmp_path), *SHORT]) == 0
  report = json.loads((tmp_path / "report.json").read_text())
  assert report["env"] == "tau2" and report["baselines"] == {}
  for stage in ("before", "after"):
    (summary,) = report[stage].values()  # no profiles: one evaluation of the tasks as they are
    assert summary["n"] == 7 and 0.0 <= summary["accuracy"] <= 1.0
  assert set(report["targets"]) == {"reward_improved"}
  demos = [json.loads(line) for line in
           (tmp_path / "warmstart" / "demonstrations.jsonl").read_text().splitlines()]
  assert len(demos) == 16
  for demo in demos:  # gold conversations: the gold action, its real result, then `done`
    calls = [c["name"] for m in demo["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    assert calls[-1] in ("done", "transfer_to_human_agents")
  assert (tmp_path / "warmstart" / "model" / "model.yaml").is_file()
  assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2
  assert "| after | all tasks |" in (tmp_path / "report.md").read_text()
