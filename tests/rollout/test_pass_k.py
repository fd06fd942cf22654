"""τ²'s pass^k (mean over tasks of C(c, k) / C(n, k)), and `toolorch eval --trials`."""

import json
import math

import pytest

from toolorch_jax import cli
from toolorch_jax.rollout.summary import pass_hat_k, successes_by_task, summarize
from toolorch_jax.rollout.trajectory import Trajectory


def test_pass_hat_k_by_hand():
  trials = {"a": [True, True, True, True], "b": [True, False, True, False],
            "c": [False, False, False, False]}
  assert pass_hat_k(trials, 1) == pytest.approx((1 + 0.5 + 0) / 3)
  assert pass_hat_k(trials, 2) == pytest.approx((1 + 1 / 6 + 0) / 3)  # b: C(2,2)/C(4,2)
  assert pass_hat_k(trials, 3) == pytest.approx(1 / 3)  # b: C(2,3) = 0
  assert pass_hat_k(trials, 4) == pytest.approx(1 / 3)
  assert pass_hat_k({"x": [True, False, True]}, 2) == pytest.approx(math.comb(2, 2) / math.comb(3, 2))
  assert pass_hat_k({}, 1) == 0.0
  with pytest.raises(ValueError, match="task 'a' has 4 trials; need k in 1..4"):
    pass_hat_k(trials, 5)


def test_summary_reports_pass_hat_k_up_to_the_fewest_trials():
  outcomes = {"a": [1.0, 1.0, 0.0], "b": [0.0, 1.0]}
  trajectories = [Trajectory(task, 0, f"{task}{i}", outcome=o)
                  for task, values in outcomes.items() for i, o in enumerate(values)]
  assert successes_by_task(trajectories) == {"a": [True, True, False], "b": [False, True]}
  summary = summarize(trajectories)
  assert summary["pass_hat_k"] == {"1": pytest.approx((2 / 3 + 1 / 2) / 2),
                                   "2": pytest.approx((1 / 3 + 0) / 2)}


def test_eval_trials_on_the_mock_domain_with_a_recorded_user(tmp_path):
  out = tmp_path / "eval"
  assert cli.main(["eval", "--env", "tau2_mock_user", "--policy", "gold", "--trials", "3",
                   "--limit", "2", "--out", str(out)]) == 0
  rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
  assert [(r["task_id"], r["trial"]) for r in rows] == [
      ("create_task_1", 0), ("create_task_1", 1), ("create_task_1", 2),
      ("create_task_1_with_env_assertions", 0), ("create_task_1_with_env_assertions", 1),
      ("create_task_1_with_env_assertions", 2)]
  summary = json.loads((out / "summary.json").read_text())
  assert summary["pass_hat_k"] == {"1": 1.0, "2": 1.0, "3": 1.0}
  assert cli.main(["eval", "--env", "tau2_mock_user", "--policy", "gold", "--trials", "0",
                   "--out", str(out)]) == 2
