"""τ²'s reward components, gold scores, and replay of τ² results files through our domains.

The small results files are cut at test time from the shipped ones (tau2/results/ in the data
directory): a few simulations with their tasks, then edited copies to see each mismatch reported.
"""

import copy
import json

import pytest

from toolorch_jax import cli
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import load_env
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import parse_task
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.mock_tools import CreateTask, GetUsers, UpdateTaskStatus
from toolorch_jax.envs.tau2.replay import replay_results
from toolorch_jax.envs.tau2.toolkit import Domain

RESULTS = "tau2/results/gpt-4.1_{}_test.json"


@pytest.fixture(scope="module")
def airline_env():
  return load_env("tau2_airline")


def small_results(domain, count, tmp_path, edit=None):
  """The first `count` simulations of a shipped results file (and their tasks), maybe edited."""
  raw = json.loads(data_path(RESULTS.format(domain)).read_text())
  simulations = copy.deepcopy(raw["simulations"][:count])
  wanted = {s["task_id"] for s in simulations}
  small = {"info": raw["info"], "tasks": [t for t in raw["tasks"] if t["id"] in wanted],
           "simulations": simulations}
  if edit:
    edit(small)
  path = tmp_path / f"{domain}.json"
  path.write_text(json.dumps(small))
  return path


def rows(out):
  return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_replay_of_a_small_airline_file_through_the_cli(tmp_path):
  path, out = small_results("airline", 5, tmp_path), tmp_path / "out"
  assert cli.main(["eval", "--env", "tau2_airline", "--replay", str(path), "--out", str(out)]) == 0
  summary = json.loads((out / "summary.json").read_text())
  assert summary["simulations"] == 5 and summary["rewards_equal"] == 5
  assert summary["outputs_matched"] == summary["outputs_total"] > 0
  recorded = [s["reward_info"]["reward"] for s in json.loads(path.read_text())["simulations"]]
  assert [r["reward"] for r in rows(out)] == recorded and 0.0 in recorded and 1.0 in recorded
  assert set(rows(out)[0]) >= {"task_id", "trial", "reward", "recorded_reward", "outputs_matched",
                               "outputs_total", "components"}


def test_replay_reports_each_mismatch_with_its_reason(airline_env, tmp_path):
  def tamper(small):
    messages = small["simulations"][0]["messages"]
    tool = next(m for m in messages if m["role"] == "tool")
    tool["content"] = json.dumps({"user_id": "someone_else"})
    small["simulations"][1]["reward_info"]["reward"] = 1 - small["simulations"][1]["reward_info"][
        "reward"]
    for message in small["simulations"][2]["messages"]:  # every call and output the same id
      for call in message.get("tool_calls") or ():
        call["id"] = "call_0"
      if message["role"] == "tool":
        message["id"] = "call_0"

  path = small_results("airline", 3, tmp_path, tamper)
  summary = replay_results(airline_env, path, tmp_path / "out")
  [output] = summary["output_mismatches"]
  assert output["task_id"] == rows(tmp_path / "out")[0]["task_id"]
  assert "output differs" in output["reason"] and "someone_else" in output["reason"]
  [reward] = summary["reward_mismatches"]
  assert reward["reason"].startswith(("DB: ours", "COMMUNICATE: ours", "components agree"))
  assert summary["rewards_equal"] == 2
  third = rows(tmp_path / "out")[2]
  assert third["outputs_matched"] == third["outputs_total"]  # paired by order, not id


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_replay_of_small_retail_and_telecom_files(domain, tmp_path):
  summary = replay_results(load_env(f"tau2_{domain}"), small_results(domain, 5, tmp_path),
                           tmp_path / "out")
  assert summary["rewards_equal"] == 5
  assert summary["outputs_matched"] == summary["outputs_total"] > 0
  calls = _tool_calls(tmp_path / f"{domain}.json")
  assert summary["outputs_total"] == len(calls)  # every call checked, the user's included
  assert (domain == "telecom") == any(call["requestor"] == "user" for call in calls)


def _tool_calls(path):
  return [call for s in json.loads(path.read_text())["simulations"] for m in s["messages"]
          for call in m.get("tool_calls") or ()]


def test_gold_actions_score_one_and_reads_alone_do_not(airline_env):
  """Gold on a few tasks (the sweep over every task is in the README); the same tasks with only
  the gold's lookups score 0 where the gold changes the db."""
  retail_env = load_env("tau2_retail")
  for env, ids, changing in ((airline_env, ("0", "1", "7", "12"), ("7", "12")),
                             (retail_env, ("0", "5", "12", "40"), ("0", "5", "40"))):
    specs = {t.id: t for t in _tasks(env.domain.name)}
    for task_id in ids:
      spec = specs[task_id]
      calls = [(a.name, a.arguments) for a in spec.criteria.actions]
      said = list(spec.criteria.communicate_info)
      reward, breakdown = scoring.score(env.domain, spec, env.initial_db(spec), calls, said, True)
      assert reward == 1.0, (env.domain.name, task_id, breakdown)
      reads = [call for call in calls if call[0].startswith(("get_", "find_", "search_"))]
      reward, _ = scoring.score(env.domain, spec, env.initial_db(spec), reads, said, True)
      assert reward == (0.0 if task_id in changing else 1.0), (env.domain.name, task_id)


def _tasks(domain):
  return [parse_task(t, f"tasks[{i}]")
          for i, t in enumerate(json.loads(data_path(f"tau2/domains/{domain}/tasks.json")
                                           .read_text()))]


# ------------------------------------------------ reward components on a small two-sided domain

TWO_SIDED = Domain("two_sided", (GetUsers, UpdateTaskStatus), {}, tables=("tasks", "users"),
                   user_tools=(CreateTask,),
                   user_assertions={"has_tasks": lambda db, a: len(db.data["tasks"]) == a["n"]})


def _db():
  return Database({"tasks": {"task_1": {"task_id": "task_1", "title": "t", "description": None,
                                        "status": "pending"}},
                   "users": {"u": {"user_id": "u", "name": "U", "tasks": ["task_1"]}}})


def _task(**criteria):
  return parse_task({"id": "t", "evaluation_criteria": criteria}, "test")


def test_reward_sides_actions_communicate_and_premature():
  task = _task(actions=[
      {"action_id": "a", "name": "create_task", "requestor": "user",
       "arguments": {"user_id": "u", "title": "New"}},
      {"action_id": "b", "name": "update_task_status", "compare_args": ["task_id"],
       "arguments": {"task_id": "task_1", "status": "completed"}}],
      env_assertions=[{"env_type": "user", "func_name": "has_tasks", "arguments": {"n": 2}}],
      communicate_info=["1000 dollars"],
      reward_basis=["DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE"])
  agent_calls = [("update_task_status", {"task_id": "task_1", "status": "completed"})]
  user_calls = [("create_task", {"user_id": "u", "title": "New"})]
  kwargs = dict(user_initial=_db(), user_calls=user_calls)
  reward, breakdown = scoring.score(TWO_SIDED, task, _db(), agent_calls, ["It is 1,000 DOLLARS."],
                                    True, **kwargs)
  assert reward == 1.0 and breakdown["user_db_match"] and breakdown["env_assertions"][0]["met"]
  assert scoring.score(TWO_SIDED, task, _db(), agent_calls, ["it is 100 dollars"], True,
                       **kwargs)[1]["rewards"]["COMMUNICATE"] == 0.0
  assert scoring.score(TWO_SIDED, task, _db(), agent_calls, ["1000 dollars"], False,
                       **kwargs) == (0.0, {"premature": True})
  # the user's call left undone: the user's db differs, the assertion and the action fail
  reward, breakdown = scoring.score(TWO_SIDED, task, _db(), agent_calls, ["1000 dollars"], True,
                                    user_initial=_db())
  assert reward == 0.0 and not breakdown["user_db_match"]
  assert breakdown["rewards"] == {"DB": 0.0, "ENV_ASSERTION": 0.0, "ACTION": 0.0,
                                  "COMMUNICATE": 1.0}
  # compare_args: only task_id counts; another status still matches the action (not the db)
  _, breakdown = scoring.score(TWO_SIDED, task, _db(),
                               [("update_task_status", {"task_id": "task_1", "status": "pending"})],
                               ["1000 dollars"], True, **kwargs)
  assert breakdown["actions"][1]["matched"] and not breakdown["db_match"]


def test_action_without_compare_args_checks_only_the_keys_passed():
  task = _task(actions=[{"action_id": "a", "name": "get_users", "arguments": {"x": 1}}],
               reward_basis=["ACTION"])
  assert scoring.score(TWO_SIDED, task, _db(), [("get_users", {})], [], True)[0] == 1.0
  assert scoring.score(TWO_SIDED, task, _db(), [("get_users", {"x": 2})], [], True)[0] == 0.0


def test_empty_actions_mean_the_db_must_not_change():
  task = _task(actions=[], reward_basis=["DB"])
  assert scoring.score(TWO_SIDED, task, _db(), [("get_users", {})], [], True)[0] == 1.0
  assert scoring.score(TWO_SIDED, task, _db(),
                       [("update_task_status", {"task_id": "task_1", "status": "completed"})],
                       [], True)[0] == 0.0
  no_criteria = _task(reward_basis=["DB"])  # neither actions nor assertions: passes, as in τ²
  assert scoring.score(TWO_SIDED, no_criteria, _db(),
                       [("update_task_status", {"task_id": "task_1", "status": "completed"})],
                       [], True)[0] == 1.0


def test_nl_assertions_without_a_judge_are_reported_and_left_out():
  task = _task(nl_assertions=["The agent apologises."], communicate_info=["sorry"],
               reward_basis=["COMMUNICATE", "NL_ASSERTION"])
  reward, breakdown = scoring.score(TWO_SIDED, task, _db(), [], ["Sorry!"], True)
  assert reward == 1.0 and breakdown["rewards"] == {"COMMUNICATE": 1.0}
  assert breakdown["nl_assertions"] == {"assertions": ["The agent apologises."],
                                        "note": scoring.NO_JUDGE}


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["airline", "retail", "telecom"])
def test_gold_scores_one_on_every_task(domain):
  """Every task of the domain: the gold actions (each on its requestor's side, in order) and the
  communicate strings said score 1.0. The figures quoted in the README."""
  env = load_env(f"tau2_{domain}")
  for spec in _tasks(domain):
    actions = spec.criteria.actions or ()
    agent_initial, user_initial = env.initial_dbs(spec)
    reward, breakdown = scoring.score(
        env.domain, spec, agent_initial,
        [(a.name, a.arguments) for a in actions if a.requestor == "assistant"],
        list(spec.criteria.communicate_info), True, user_initial=user_initial,
        user_calls=[(a.name, a.arguments) for a in actions if a.requestor == "user"],
        order=[a.requestor for a in actions])
    assert reward == 1.0, (spec.id, breakdown)


def test_bad_results_files_are_named(airline_env, tmp_path, capsys):
  from toolorch_jax.config import ConfigError

  path = tmp_path / "bad.json"
  path.write_text(json.dumps({"tasks": []}))
  with pytest.raises(ConfigError, match="bad.json: 'simulations' must be a list"):
    replay_results(airline_env, path, tmp_path / "out")
  path.write_text(json.dumps({"tasks": [], "simulations": [{"task_id": "9", "messages": []}]}))
  with pytest.raises(ConfigError, match=r"simulations\[0\]: task '9' is not among the file's"):
    replay_results(airline_env, path, tmp_path / "out")
  assert cli.main(["eval", "--env", "routing", "--replay", str(path), "--out",
                   str(tmp_path / "o")]) == 2
  assert "--replay: needs a τ² environment" in capsys.readouterr().err
