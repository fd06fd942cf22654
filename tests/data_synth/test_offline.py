"""The offline pipeline end to end: a small domain synthesised, written, loaded by the τ²
environment, every kept task solved by its gold calls and failed by the empty trajectory."""

import json

import pytest

from data_synth import description as descriptions
from data_synth.pipeline import SynthConfig, synthesize
from data_synth.verify import select
from toolorch_jax import cli
from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.env import Settings, Tau2Environment

FILES = ("db.json", "policy.md", "tasks.json", "split_tasks.json", "tools.json")


def _run(out, description, seed=0, tasks=25):
  return synthesize(SynthConfig(out=out, seed=seed, tasks=tasks, domains=(str(description),),
                                progress=False))


def test_small_domain_end_to_end(tmp_path, small_description):
  stats = _run(tmp_path / "out", small_description)
  folder = tmp_path / "out" / "notes"
  assert all((folder / name).is_file() for name in FILES)
  assert (tmp_path / "out" / "stats.md").is_file()
  (row,) = stats["domains"]
  assert row["tasks"] == 25 and row["tools"] == 3 and row["entries"] == 28
  splits = json.loads((folder / "split_tasks.json").read_text())
  assert len(splits["base"]) == 25 and sorted(splits["train"] + splits["test"]) == sorted(splits["base"])
  env = Tau2Environment(Settings(domain=str(folder), split="base"))
  tasks = env.tasks()
  assert len(tasks) == 25 and not env.skipped
  for task in tasks:
    spec, initial = task.answer, env.initial_db(task.answer)
    gold = [(a.name, a.arguments) for a in spec.criteria.actions]
    said = ["\n".join(spec.criteria.communicate_info)]
    assert scoring.score(env.domain, spec, initial, gold, said, True)[0] == 1.0
    assert scoring.score(env.domain, spec, initial, [], [], True)[0] == 0.0
  lines = (tmp_path / "out" / "toolscale.jsonl").read_text().splitlines()
  assert len(lines) == 25 and json.loads(lines[0])["domain"] == "notes"


def test_eval_cli_plays_a_generated_domain_with_gold(tmp_path, small_description):
  _run(tmp_path / "out", small_description, tasks=10)
  out = tmp_path / "eval"
  assert cli.main(["eval", "--env", "tau2_mock", "--policy", "gold", "--out", str(out),
                   f"settings.domain={tmp_path / 'out' / 'notes'}", "settings.split=base"]) == 0
  summary = json.loads((out / "summary.json").read_text())
  assert summary["n_tasks"] == 10 and summary["success_rate"] == 1.0


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, small_description):
  for name, seed in (("a", 3), ("b", 3), ("c", 4)):
    _run(tmp_path / name, small_description, seed=seed, tasks=15)
  read = lambda name: {f: (tmp_path / name / "notes" / f).read_bytes() for f in FILES}  # noqa: E731
  assert read("a") == read("b")
  assert read("a")["tasks.json"] != read("c")["tasks.json"]


def test_rerun_loads_cached_stages_and_redoes_a_changed_domain(tmp_path, small_description):
  out = tmp_path / "out"
  first = _run(out, small_description, tasks=10)
  assert not any(u["cached"] for u in first["usage"])
  assert all(u["cached"] for u in _run(out, small_description, tasks=10)["usage"])
  small_description.write_text(small_description.read_text().replace("rows: 20", "rows: 21"))
  again = _run(out, small_description, tasks=10)
  assert not any(u["cached"] for u in again["usage"]) and again["total"]["entries"] == 29


def test_planted_bad_tasks_are_filtered(tmp_path, small_description):
  _run(tmp_path / "out", small_description, tasks=10)
  folder = tmp_path / "out" / "notes"
  env = Tau2Environment(Settings(domain=str(folder), split="base"))
  db = json.loads((folder / "db.json").read_text())
  good = json.loads((folder / "tasks.json").read_text())[:3]
  raises = json.loads(json.dumps(good[0]))
  raises["id"] = "raises"
  raises["evaluation_criteria"]["actions"][0]["arguments"] = {"note_id": "N9999"}
  noop = json.loads(json.dumps(good[1]))
  noop["id"] = "noop"
  noop["evaluation_criteria"].update(
      actions=[{"action_id": "r", "name": "get_note", "arguments": {"note_id": "N0001"}}],
      env_assertions=[], communicate_info=[], reward_basis=["DB", "COMMUNICATE"])
  duplicate = {**good[2], "id": "duplicate"}
  kept, dropped = select(env.domain, db, [*good, raises, noop, duplicate])
  assert [t["id"] for t in kept] == [t["id"] for t in good]
  assert dropped["gold_raises"] == dropped["noop_succeeds"] == dropped["duplicate_actions"] == 1


def test_shipped_descriptions_are_valid_and_not_tau2_domains():
  assert set(descriptions.SHIPPED).isdisjoint({"airline", "retail", "telecom"})
  for name in descriptions.SHIPPED:
    assert descriptions.shipped(name)["domain"] == name


def test_cli_synth_offline_writes_the_contract(tmp_path):
  out = tmp_path / "out"
  assert cli.main(["synth", "--offline", "--out", str(out), "--seed", "1", "--tasks", "5",
                   "--no-progress"]) == 0
  for name in descriptions.SHIPPED:
    assert all((out / name / f).is_file() for f in FILES)
    splits = json.loads((out / name / "split_tasks.json").read_text())
    assert set(splits) == {"base", "train", "test"} and len(splits["base"]) == 5
  assert (out / "stats.json").is_file() and (out / "stats.md").is_file()


def test_a_directory_without_a_tool_spec_is_refused(tmp_path):
  with pytest.raises(ConfigError, match="has no tools.json"):
    Tau2Environment(Settings(domain=str(tmp_path), split="base"))


def test_pass_at_k_plays_the_tasks_with_a_policy(tmp_path, small_description):
  stats = synthesize(SynthConfig(out=tmp_path / "out", tasks=6, domains=(str(small_description),),
                                 progress=False, pass_k=2, pass_policy="gold"))
  (row,) = stats["domains"]
  assert row["dropped"]["pass_at_2"] == 0 and row["tasks"] == 6  # gold solves every kept task
  assert any(u["stage"] == "pass_at_2" for u in stats["usage"])
