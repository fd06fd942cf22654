"""The embedded default run, shortened: every stage runs and the report has its schema."""

import json

import pytest

pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")

from toolorch_jax.config import config_dir, load_config  # noqa: E402
from toolorch_jax.envs import build_env  # noqa: E402
from toolorch_jax.rl.config import RunConfig  # noqa: E402
from toolorch_jax.rl.pipeline import run_training  # noqa: E402

SHORT = ["train.steps=2", "warmstart.steps=3", "warmstart.demonstrations=32", "report.tasks=6",
         "rollout.tasks_per_step=2", "rollout.group_size=4", "train.progress=false",
         "train.tensorboard=false"]
PROFILE_KEYS = {"mean_reward", "accuracy", "mean_cost_usd", "mean_latency_s", "tool_mix", "n", "utility",
                "decisions", "unfinished"}


def test_short_local_run_writes_the_report(tmp_path):
  config = load_config(RunConfig, config_dir() / "local.yaml", SHORT)
  report = run_training(config, tmp_path)
  saved = json.loads((tmp_path / "report.json").read_text())
  assert saved == json.loads(json.dumps(report))
  profiles = {"accuracy first", "cost first"}
  for stage in ("before", "after"):
    assert set(saved[stage]) == profiles
    for summary in saved[stage].values():
      assert set(summary) == PROFILE_KEYS and summary["n"] == 6
      assert set(summary["tool_mix"]) == {"answer-1", "answer-2"}
      assert sum(summary["unfinished"].values()) <= summary["n"] and "env" not in summary["unfinished"]
  baselines = saved["baselines"]
  assert {"always_strong", "always_weak", "random_at_matched_cost", "oracle"} <= set(baselines)
  for name in ("always_strong", "always_weak", "oracle"):
    assert set(baselines[name]) == {"accuracy", "mean_cost_usd", "mean_latency_s", "utility"}
  # every figure on each profile's fixed scale: accuracy minus cost in units of the strong-weak
  # spread measured once on the training split, the same for the policy and the baselines
  env = build_env(config.env)
  assert not any(p.tools for p in env.profiles())  # no profile's weights name the answer
  # the warm start imitates the choices the run's reward scored highest, under each task's profile
  selection = json.loads((tmp_path / "warmstart" / "selection.json").read_text())
  assert (selection["tasks"], selection["not_ended_by_env"]) == (32, 0)
  assert set(selection["profile_tool_mix"]) == {"accuracy first", "cost first"}
  for preference in env.profiles():
    unit = preference.cost_unit
    for stage in ("before", "after"):
      point = saved[stage][preference.name]
      assert point["utility"] == pytest.approx(point["accuracy"] - preference.cost * point["mean_cost_usd"] / unit)
    for name in ("always_strong", "always_weak", "oracle"):
      point = baselines[name]
      assert point["utility"][preference.name] == pytest.approx(
          point["accuracy"] - preference.cost * point["mean_cost_usd"] / unit)
    matched = baselines["random_at_matched_cost"][preference.name]
    assert matched["utility"] == pytest.approx(matched["accuracy"] - preference.cost * matched["mean_cost_usd"] / unit)
  assert "Utility on each profile's fixed scale" in (tmp_path / "report.md").read_text()
  assert baselines["always_strong"]["mean_cost_usd"] > 10 * baselines["always_weak"]["mean_cost_usd"]
  assert saved["wall_seconds"] > 0 and saved["peak_memory_mib"] > 0
  assert set(saved["targets"]) == {"utility_improved", "cost_first_spends_40pct_less",
                                   "above_random_mixing/accuracy first",
                                   "above_random_mixing/cost first"}
  assert "| after | cost first |" in (tmp_path / "report.md").read_text()
  for picture in ("reward_curve.png", "accuracy_vs_cost.png"):
    assert (tmp_path / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert (tmp_path / "tokenizer" / "tokenizer.model").is_file()
  assert (tmp_path / "warmstart" / "model" / "model.yaml").is_file()
  assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2


def test_short_long_run_warm_starts_on_the_branches_its_reward_chose(tmp_path):
  overrides = [o for o in SHORT if not o.startswith("warmstart.demonstrations")]
  config = load_config(RunConfig, config_dir() / "local-long.yaml",
                       overrides + ["warmstart.demonstrations=16", "model.preset=local"])
  report = run_training(config, tmp_path)
  selection = json.loads((tmp_path / "warmstart" / "selection.json").read_text())
  assert (selection["tasks"], selection["branches"], selection["not_ended_by_env"]) == (16, 32, 0)
  env = build_env(config.env)
  by_prompt = {t.prompt: t for t in env.tasks("train")}
  demos = [json.loads(line) for line in (tmp_path / "warmstart" / "demonstrations.jsonl").read_text().splitlines()]
  assert len(demos) == 16
  for demo in demos:  # each keeps the better side of its decision, by the run's utility
    task = by_prompt[next(m["content"] for m in demo["messages"] if m["role"] == "user").rpartition("\n\n")[0]]
    right = task.metadata["correct"]
    decision = [m for m in demo["messages"] if m["role"] == "assistant"][-1]["tool_calls"][0]["name"]
    assert decision == ("answer" if right["answer-1"] and not right["answer-2"] else "accept")
  assert set(report["before"]) == set(report["after"]) == {"balanced"}
  assert set(report["targets"]) == {"utility_above_warm_start", "utility_above_always_strong",
                                    "utility_above_always_weak", "accuracy_3pts_above_random_mixing"}
