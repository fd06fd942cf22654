"""QA environment parts: graders (a table of cases), the LLM judge against a loopback expert,
task files and splits, preference profiles, config errors, and `toolorch eval` with gold."""

import asyncio
import json

import pytest

from tests.tools.loopback import completion, serve
from tests.tools.test_llm_expert import make_expert
from toolorch_jax import cli
from toolorch_jax.config import ConfigError
from toolorch_jax.envs import EnvConfig, build_env, load_env
from toolorch_jax.data import in_split
from toolorch_jax.data import read_task_file
from toolorch_jax.envs.qa.data import DATASETS
from toolorch_jax.envs.qa.graders import ExactMatch, LLMJudge, NumericMatch, parse_verdict
from toolorch_jax.envs.qa.replies import boxed, final_answer, python_code, tagged

GRADERS = {"exact": ExactMatch(), "numeric": NumericMatch()}
CASES = [  # grader, prediction, gold, score
    ("exact", "Carlo Maciachini", "Carlo Maciachini", 1.0),
    ("exact", "the Eiffel Tower.", "Eiffel Tower", 1.0),
    ("exact", "  JANE   BALLOU!! ", "Jane Ballou", 1.0),
    ("exact", "An apple", "apple", 1.0),
    ("exact", "37th", "37th", 1.0),
    ("exact", "2125", "2,125", 1.0),
    ("exact", "Jane Ballou Smith", "Jane Ballou", 0.0),
    ("exact", "Paris", "France", 0.0),
    ("exact", "", "France", 0.0),
    ("exact", "the", "The", 0.0),  # nothing left after normalisation is never a match
    ("numeric", "18", "18", 1.0),
    ("numeric", "The answer is $1,234.", "1,234", 1.0),
    ("numeric", "#### 1,234", "1234", 1.0),
    ("numeric", "9 * 2 = 18 dollars\n#### 18", "#### 18", 1.0),
    ("numeric", "18.0", "18", 1.0),
    ("numeric", "$1,450,000.00", "1,450,000", 1.0),
    ("numeric", "50%", "50", 1.0),
    ("numeric", "-5", "-5", 1.0),
    ("numeric", "10-5 = 5", "5", 1.0),  # a minus glued to a digit is subtraction, not a sign
    ("numeric", "0.30000000000000004", "0.3", 1.0),
    ("numeric", "#### 7 (I first thought 8)", "7", 1.0),  # `####` wins over the last number
    ("numeric", "17", "18", 0.0),
    ("numeric", "12 apples and 3 pears", "12", 0.0),  # the last number counts
    ("numeric", "eighteen", "18", 0.0),
    ("numeric", "18", "Jane Ballou", 0.0),
]


def grade(grader, prediction, gold):
  return asyncio.run(grader.grade("q?", prediction, gold))


def test_grader_table():
  rows = [(name, prediction, gold, expected, grade(GRADERS[name], prediction, gold))
          for name, prediction, gold, expected in CASES]
  print(f"\n{'grader':8} {'prediction':32} {'gold':14} score  reason")
  for name, prediction, gold, _, result in rows:
    print(f"{name:8} {prediction!r:32} {gold!r:14} {result.score:.1f}    {result.reason}")
  assert [r.score for *_, r in rows] == [expected for *_, expected, _ in rows]
  assert grade(NumericMatch(), "x", "18").reason == "no number in the answer"
  assert grade(NumericMatch(), "17", "18").reason == "numbers differ: 17 vs gold 18"


def test_replies_extraction():
  assert tagged("<think><query>no</query></think>a <query> Pavia dome </query>", "query") == \
      "Pavia dome"
  assert tagged("no tags", "query") is None
  assert python_code("x\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```") == "print(2)"
  assert python_code("```\nprint(1)\n```") == ""
  assert boxed(r"so \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
  assert final_answer("<think>maybe 3</think>It is <answer> 4 </answer>") == "4"
  assert final_answer(r"thus \boxed{42}") == "42"
  assert final_answer("<think>x</think> Paris ") == "Paris"


@pytest.mark.parametrize("reply, verdict", [
    ("Yes.", True), ("yes, it matches", True), ("<correct>True</correct>", True),
    ("No", False), ("<think>yes? no?</think>No, it does not.", False),
    ("I cannot tell", None), ("yes and no", None), ("", None)])
def test_parse_verdict(reply, verdict):
  assert parse_verdict(reply) is verdict


def judge_grade(reply, prediction="Jane B.", attempts=1):
  with serve([reply]) as server:
    judge = LLMJudge(make_expert(server.url, attempts=attempts, system_prompt=""), "answer-1")
    result = asyncio.run(judge.grade("Who is my future wife?", prediction, "Jane Ballou"))
  return result, server.requests


def test_llm_judge_yes_no_garbage_and_failure():
  result, (request,) = judge_grade(("json", 200, completion("Yes.", 80, 2)))
  assert (result.score, result.reason) == (1.0, "judge answer-1 says yes")
  assert result.cost_usd == pytest.approx((80 * 1.25 + 2 * 10.0) / 1e6) and result.latency_s > 0
  prompt = request.body["messages"][-1]["content"]
  assert "Who is my future wife?" in prompt and "Student answer: Jane B." in prompt
  assert "Reference answer: Jane Ballou" in prompt and request.body["model"] == "gpt-5"

  result, _ = judge_grade(("json", 200, completion("No, that is someone else.", 80, 6)))
  assert (result.score, result.reason) == (0.0, "judge answer-1 says no")
  assert result.cost_usd > 0

  result, _ = judge_grade(("json", 200, completion("Hard to say.", 80, 4)))
  assert result.score == 0.0 and result.reason == "judge verdict not understood: 'Hard to say.'"

  result, requests = judge_grade(("json", 500, {"error": "down"}), attempts=2)
  assert result.score == 0.0 and len(requests) == 2
  assert result.reason.startswith("judge failed: gave up on") and "HTTP 500" in result.reason
  assert result.cost_usd == 0.0


def test_llm_judge_skips_the_call_for_exact_and_empty_answers():
  result, requests = judge_grade(("json", 200, completion("no", 1, 1)), prediction="jane ballou!")
  assert (result.score, result.reason, requests) == (1.0, "exact match (judge not asked)", [])
  result, requests = judge_grade(("json", 200, completion("yes", 1, 1)), prediction="  ")
  assert (result.score, result.reason, requests) == (0.0, "empty answer", [])


def test_frames_and_gsm8k_records():
  frames = read_task_file(DATASETS["frames"], "env.settings.dataset")
  assert len(frames) == 824
  assert (frames[0].task_id, frames[0].answer) == ("wiki____0", "Jane Ballou")
  assert frames[0].prompt.startswith("If my future wife has the same first name")
  gsm8k = read_task_file(DATASETS["gsm8k"], "env.settings.dataset")
  assert len(gsm8k) == 1319 and [t.task_id for t in gsm8k[:2]] == ["gsm8k-0", "gsm8k-1"]
  assert gsm8k[0].answer == "18" and gsm8k[0].metadata["solution"].endswith("#### 18")
  assert sum("," in t.answer for t in gsm8k) == 14  # e.g. "2,125": the numeric grader reads them


def test_split_is_by_id_deterministic_and_disjoint():
  env = load_env("gsm8k_basic")
  train, test, every = env.tasks("train"), env.tasks("test"), env.tasks("all")
  assert len(every) == 1319 and len(train) + len(test) == 1319
  assert not {t.task_id for t in train} & {t.task_id for t in test}
  assert 0.17 < len(test) / 1319 < 0.23
  assert [t.task_id for t in env.tasks()] == [t.task_id for t in test]  # default split: test
  assert all(in_split(t.task_id, "test", 0.2) for t in test)
  again = load_env("gsm8k_basic", ["settings.limit=5"])
  assert [t.task_id for t in again.tasks()] == [t.task_id for t in test[:5]]
  assert load_env("gsm8k_basic", ["settings.test_fraction=0"]).tasks() == []


def test_a_jsonl_file_with_its_own_field_names(tmp_path):
  path = tmp_path / "mine.jsonl"
  rows = [{"key": "a", "q": "Two plus two?", "a": "4"}, {"key": "b", "q": "Capital of Japan?",
                                                          "a": "Tokyo"}]
  path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
  env = build_env(EnvConfig("qa", {"dataset": str(path), "id_field": "key", "question_field": "q",
                                   "answer_field": "a", "surface": "basic", "toolset": "local",
                                   "search_tool": "search", "split": "all"}))
  assert [(t.task_id, t.prompt, t.answer) for t in env.tasks()] == [
      ("a", "Two plus two?", "4"), ("b", "Capital of Japan?", "Tokyo")]
  no_ids = build_env(EnvConfig("qa", {"dataset": str(path), "id_field": "", "question_field": "q",
                                      "answer_field": "a", "surface": "basic", "toolset": "local",
                                      "search_tool": "search", "split": "all"}))
  assert [t.task_id for t in no_ids.tasks()] == ["mine-0", "mine-1"]


PROFILES = [{"name": "accuracy first", "accuracy": 1.0},
            {"name": "cost first", "accuracy": 1.0, "cost": 1.0},
            {"name": "likes python", "accuracy": 1.0, "tools": {"python": 2.0}}]


def test_preference_profiles_are_drawn_per_task_id():
  env = load_env("gsm8k_basic", [f"settings.profiles={json.dumps(PROFILES)}"])
  again = load_env("gsm8k_basic", [f"settings.profiles={json.dumps(PROFILES)}",
                                   "settings.limit=50"])
  tasks = env.tasks()
  drawn = [t.preference.name for t in tasks]
  assert drawn[:50] == [t.preference.name for t in again.tasks()]  # same id, same profile
  assert {name: drawn.count(name) > 40 for name in set(drawn)} == dict.fromkeys(
      ["accuracy first", "cost first", "likes python"], True)
  task = next(t for t in tasks if t.preference.name == "likes python")
  assert task.preference.tools == {"python": 2.0}
  (system, user) = env.start(task).messages()
  assert system["content"].endswith("\n\n" + task.preference.describe())
  assert "Preferred tools: python (weight 2)" in system["content"]
  assert user == {"role": "user", "content": task.prompt}
  plain = load_env("gsm8k_basic").tasks()[0]
  assert plain.preference is None
  assert "The user cares" not in load_env("gsm8k_basic").start(plain).messages()[0]["content"]


BASIC = {"dataset": "gsm8k", "surface": "basic", "toolset": "local", "search_tool": "search",
         "grader": "numeric"}
BAD_SETTINGS = [
    ({"surface": "fancy"}, "env.settings.surface: unknown surface 'fancy'"),
    ({"grader": "vibes"}, "env.settings.grader: unknown grader 'vibes'"),
    ({"split": "dev"}, "env.settings.split: unknown split 'dev'"),
    ({"test_fraction": 1.5}, "env.settings.test_fraction: must be in [0, 1]"),
    ({"limit": -1}, "env.settings.limit: must be >= 0"),
    ({"dataset": "squad"}, "env.settings.dataset: unknown dataset 'squad'"),
    ({"dataset": "nope/missing.jsonl"}, "env.settings.dataset: data file 'nope/missing.jsonl'"),
    ({"question_field": "prompt"}, "gsm8k/test.jsonl:1: field 'prompt' must be a non-empty string"),
    ({"search_tool": "web"}, "env.settings.search_tool: the tool set has no tool 'web'"),
    ({"python_tool": "py"}, "env.settings.python_tool: the tool set has no tool 'py'"),
    ({"grader": "judge", "judge_tool": "python"},
     "env.settings.judge_tool: tool 'python' is not an expert"),
    ({"grader": "judge", "judge_model": "answer-9"},
     "env.settings.judge_model: 'answer-9' is not offered by tool 'answer'"),
    ({"surface": "orchestra"},
     "env.settings.toolset: the tool set has no tool 'enhance_reasoning'"),
    ({"toolset": "nothere"}, "unknown tool set 'nothere'"),
    ({"profiles": [{"tools": {"answer-7": 1.0}}]},
     "env.settings.profiles[0].tools.answer-7: not a tool or model the policy can choose"),
    ({"profiles": [{"cost": -1.0}]}, "env.settings.profiles[0].cost: weights must be >= 0"),
    ({"preference": []}, "unknown key 'preference'"),
    ({"limit": "many"}, "bad value for key 'limit'"),
]


@pytest.mark.parametrize("update, message", BAD_SETTINGS, ids=[m[:40] for _, m in BAD_SETTINGS])
def test_bad_settings_name_the_key(update, message):
  with pytest.raises(ConfigError) as err:
    build_env(EnvConfig("qa", {**BASIC, **update}))
  assert message in str(err.value)


@pytest.mark.parametrize("line, message", [
    ("[1, 2]", "bad.jsonl:2: expected a JSON object, got list"),
    ('{"id": "x", "question": "q"', "bad.jsonl:2: not valid JSON"),
    ('{"id": "x", "question": "", "answer": "a"}', "bad.jsonl:2: field 'question' must be"),
    ('{"id": "a", "question": "q", "answer": "a"}',
     "bad.jsonl:2: duplicate id 'a' (first at "),
])
def test_bad_task_files_name_the_line_and_field(tmp_path, line, message):
  path = tmp_path / "bad.jsonl"
  path.write_text('{"id": "a", "question": "q", "answer": "a"}\n' + line + "\n")
  with pytest.raises(ConfigError) as err:
    build_env(EnvConfig("qa", {**BASIC, "dataset": str(path)}))
  assert message in str(err.value)


def test_gsm8k_marker_is_required(tmp_path):
  path = tmp_path / "g.jsonl"
  for text in ("just 4", "4 ####  "):
    path.write_text(json.dumps({"question": "q", "answer": text}) + "\n")
    with pytest.raises(ConfigError, match="g.jsonl:1: field 'answer' has no final answer after"):
      build_env(EnvConfig("qa", {**BASIC, "dataset": str(path), "answer_marker": "####",
                                 "id_field": ""}))


def test_orchestra_surface_has_no_gold_policy():
  env = load_env("frames_orchestra")
  with pytest.raises(NotImplementedError, match="use surface: basic"):
    env.gold_script(env.tasks()[0])


def test_eval_gold_on_gsm8k_basic(tmp_path):
  out = tmp_path / "eval"
  assert cli.main(["eval", "--env", "gsm8k_basic", "--policy", "gold", "--limit", "20",
                   "--out", str(out)]) == 0
  summary = json.loads((out / "summary.json").read_text())
  assert summary["n_tasks"] == 20 and summary["success_rate"] == 1.0
  assert summary["tool_mix"] == {"answer": 1.0} and summary["finish"] == {"env": 20}
  rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
  assert len(rows) == 20 and all(row["reward"] == 1.0 and row["cost_usd"] == 0 for row in rows)
