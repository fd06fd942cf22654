"""`toolorch eval --suite`: benchmarks from a YAML, one table beside the paper's reference rows.
Offline: τ²'s mock domain with a recorded user, and HLE- and GAIA-format question files."""

import json

import pytest

from toolorch_jax import cli
from toolorch_jax.config import ConfigError
from toolorch_jax.rollout.suite import load_suite


@pytest.fixture
def suite(tmp_path):
  hle = tmp_path / "hle.jsonl"  # HLE's fields: id, question, answer
  hle.write_text("".join(json.dumps({"id": f"h{i}", "question": f"What is {i} + {i}?",
                                     "answer": str(2 * i)}) + "\n" for i in range(3)))
  gaia = tmp_path / "gaia.jsonl"  # GAIA's fields: task_id, Question, Final answer
  gaia.write_text("".join(json.dumps({"task_id": f"g{i}", "Question": f"Name {i}?",
                                      "Final answer": f"n{i}"}) + "\n" for i in range(2)))
  qa = ["settings.surface=basic", "settings.toolset=local", "settings.search_tool=search",
        "settings.grader=exact", "settings.profiles=[]"]
  config = {  # JSON is YAML
      "policy": "gold", "columns": ["HLE", "τ²-Bench"],
      "benchmarks": [
          {"name": "τ² mock", "env": "tau2_mock_user", "limit": 3, "trials": 2,
           "column": "τ²-Bench"},
          {"name": "HLE", "env": "gsm8k_basic", "split": "all", "column": "HLE",
           "overrides": [*qa, f"settings.dataset={hle}"]},
          {"name": "GAIA", "env": "gsm8k_basic", "split": "all",
           "overrides": [*qa, f"settings.dataset={gaia}", "settings.id_field=task_id",
                         "settings.question_field=Question", "settings.answer_field=Final answer"]}],
      "reference": [{"name": "Orchestrator-8B", "scores": {"HLE": 37.1, "τ²-Bench": 80.2},
                     "source": "paper"}]}
  path = tmp_path / "suite.yaml"
  path.write_text(json.dumps(config, ensure_ascii=False))
  return path


def test_suite_writes_each_benchmark_and_one_table(suite, tmp_path, capsys):
  out = tmp_path / "out"
  assert cli.main(["eval", "--suite", str(suite), "--out", str(out)]) == 0
  table = json.loads((out / "table.json").read_text())
  rows = {r["benchmark"]: r for r in table["benchmarks"]}
  assert (rows["τ² mock"]["tasks"], rows["τ² mock"]["trials"]) == (3, 2)
  assert (rows["HLE"]["tasks"], rows["GAIA"]["tasks"]) == (3, 2)
  assert all(r["accuracy"] == 100.0 and r["policy"] == "gold" for r in rows.values())
  ours, paper = table["paper"]
  assert ours["scores"] == {"HLE": 100.0, "τ²-Bench": 100.0}  # GAIA counts toward no column
  assert paper == {"name": "Orchestrator-8B", "source": "paper", "cost_usd": None,
                   "latency_s": None, "scores": {"HLE": 37.1, "τ²-Bench": 80.2}}
  assert (out / "τ²_mock" / "results.jsonl").is_file() and (out / "GAIA" / "summary.json").is_file()
  markdown = (out / "table.md").read_text()
  assert "| τ² mock | gold | 3 × 2 | 100.0 |" in markdown
  assert "| Orchestrator-8B | 37.1 | 80.2 |  |  | paper |" in markdown
  assert markdown in capsys.readouterr().out


def test_suite_errors_name_the_field(suite, tmp_path):
  with pytest.raises(ConfigError, match="benchmarks\\[0\\].column: 'τ²-Bench' is not one of columns"):
    load_suite(str(suite), ["columns=[]"])
  assert load_suite("paper").columns == ["HLE", "FRAMES", "τ²-Bench"]
  assert cli.main(["eval", "--suite", str(suite), "--env", "tau2_mock", "--out",
                   str(tmp_path)]) == 2
  assert cli.main(["eval", "--out", str(tmp_path)]) == 2  # neither --env nor --suite
