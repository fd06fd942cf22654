"""`toolorch eval` end to end: the τ² mock domain with its gold policy."""

import json

from toolorch_jax import cli


def test_eval_gold_on_tau2_mock_writes_results_and_summary(tmp_path):
  out = tmp_path / "eval"
  assert cli.main(["eval", "--env", "tau2_mock", "--policy", "gold", "--out", str(out)]) == 0
  rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
  assert len(rows) == 7 and all(row["reward"] == 1.0 for row in rows)
  assert {"task_id", "reward", "cost_usd", "latency_s", "tool_calls"} <= set(rows[0])
  summary = json.loads((out / "summary.json").read_text())
  assert summary["n_tasks"] == 7 and summary["success_rate"] == 1.0
  assert abs(sum(summary["tool_mix"].values()) - 1.0) < 1e-9 and "done" in summary["tool_mix"]
  assert {"mean_cost_usd", "mean_latency_s"} <= set(summary)
  assert len((out / "trajectories.jsonl").read_text().splitlines()) == 7


def test_eval_errors_name_the_problem(tmp_path, capsys):
  assert cli.main(["eval", "--env", "tau2_mock", "--policy", "gold", "--split", "nope",
                   "--out", str(tmp_path)]) == 2
  assert "unknown split 'nope'" in capsys.readouterr().err
  assert cli.main(["eval", "--env", "tau2_mock", "--policy", "ftp://x", "--out", str(tmp_path)]) == 2
  assert cli.main(["eval", "--env", "no_such_env", "--policy", "gold", "--out", str(tmp_path)]) == 2
  assert cli.main(["eval", "--env", "frames_orchestra", "--policy", "gold", "--out",
                   str(tmp_path)]) == 2
  assert "--policy gold: environment 'qa' has no gold_script" in capsys.readouterr().err
