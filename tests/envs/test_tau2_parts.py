"""τ² pieces on their own: the database hash, the mock tools' errors, task parsing, configs."""

import asyncio
import json
import shutil

import pytest

from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import EnvConfig, build_env, load_env
from toolorch_jax.envs.registry import ENVIRONMENTS
from toolorch_jax.envs.tau2 import Tau2Environment
from toolorch_jax.envs.tau2.data import Action, parse_task
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.env import Settings
from toolorch_jax.tools import ToolCall, ToolContext

MOCK_DB_HASH = "8729effbe2b2e1c7f4310be2c87e6c2d314db0fb5ff4b4444bb4df2a83c1d354"  # of db.json


@pytest.fixture(scope="module")
def env():
  return load_env("tau2_mock")


def leaf_paths(data, path=()):
  if isinstance(data, dict):
    for key, value in data.items():
      yield from leaf_paths(value, path + (key,))
  elif isinstance(data, list):
    for index, value in enumerate(data):
      yield from leaf_paths(value, path + (index,))
  else:
    yield path


def test_db_hash_is_stable_and_sees_every_mutation(env):
  assert env.db.hash() == MOCK_DB_HASH == load_env("tau2_mock").db.hash() == env.db.copy().hash()
  reversed_keys = lambda pairs: dict(reversed(pairs))
  reordered = Database(json.loads(json.dumps(env.db.data), object_pairs_hook=reversed_keys))
  assert reordered.hash() == MOCK_DB_HASH  # key order does not matter
  for path in leaf_paths(env.db.data):
    db = env.db.copy()
    *parents, last = path
    target = db.data
    for key in parents:
      target = target[key]
    target[last] = target[last] + "x"
    assert db.hash() != MOCK_DB_HASH, path
    assert env.db.hash() == MOCK_DB_HASH  # copies are deep
  for mutate in (lambda d: d["users"]["user_1"]["tasks"].append("task_1"),
                 lambda d: d["tasks"]["task_1"].update(extra=None),
                 lambda d: d["tasks"]["task_1"].update(description=None),
                 lambda d: d.update(other={})):
    db = env.db.copy()
    mutate(db.data)
    assert db.hash() != MOCK_DB_HASH


def test_initial_states(env):
  """initialization_data merges into the db; initialization_actions run the domain's tools."""
  by_id = {t.task_id: t.answer for t in env.tasks()}
  merged = env.initial_db(by_id["update_task_with_initialization_data"]).data
  assert merged["users"]["user_1"] == {"user_id": "user_1", "name": "Test User",
                                       "tasks": ["task_1", "task_2"]}
  assert merged["tasks"]["task_2"]["status"] == "pending"
  acted = env.initial_db(by_id["update_task_with_initialization_actions"]).data
  assert acted == merged  # the same start, reached by running create_task
  assert env.initial_db(by_id["update_task_1"]).hash() == MOCK_DB_HASH
  assert env.db.hash() == MOCK_DB_HASH


def execute(episode, name, arguments):
  return asyncio.run(episode.execute(ToolCall(name, arguments), ToolContext()))


def test_tools_and_their_errors_never_raise(env):
  episode = env.start(env.tasks()[0])
  before = episode.db.hash()
  errors = [
      ("create_task", '{"user_id": "nobody", "title": "t"}', "user 'nobody' not found"),
      ("create_task", {"user_id": "user_1"}, "'title' is a required property"),
      ("create_task", {"user_id": "user_1", "title": 7}, "'title': 7 is not of type 'string'"),
      ("create_task", {"user_id": "user_1", "title": "t", "due": "now"}, "('due' was unexpected)"),
      ("create_task", "{not json", "not valid JSON"),
      ("update_task_status", {"task_id": "task_9", "status": "done"}, "'done' is not one of"),
      ("update_task_status", {"task_id": "task_9", "status": "pending"}, "task 'task_9' not found"),
      ("update_task_status", {"task_id": "task_1", "status": "deleted"}, "'deleted' is not one of"),
      ("get_users", {"all": True}, "('all' was unexpected)"),
      ("transfer_to_human_agents", {}, "'summary' is a required property"),
      ("delete_task", {"task_id": "task_1"}, "unknown tool 'delete_task'"),
  ]
  for name, arguments, message in errors:
    result = execute(episode, name, arguments)
    assert message in result.error, (name, arguments, result.error)
  assert episode.db.hash() == before and not episode.done
  users = json.loads(execute(episode, "get_users", {}).text)
  assert users == [{"user_id": "user_1", "name": "Test User", "tasks": ["task_1"]}]
  arguments = {"user_id": "user_1", "title": "A", "description": None}
  created = json.loads(execute(episode, "create_task", arguments).text)
  assert created == {"task_id": "task_2", "title": "A", "description": None, "status": "pending"}
  arguments = {"task_id": "task_2", "status": "completed"}
  assert json.loads(execute(episode, "update_task_status", arguments).text)["status"] == "completed"
  assert episode.db.data["users"]["user_1"]["tasks"] == ["task_1", "task_2"]
  transfer = execute(episode, "transfer_to_human_agents", {"summary": "s"})
  assert transfer.text == "Transfer successful"
  assert episode.done and episode.ended_by == "transfer_to_human_agents"
  after = execute(episode, "get_users", {})
  assert after.error == "not run: 'transfer_to_human_agents' ended the episode"
  assert episode.score() == 0.0 and not episode.breakdown["db_match"]  # task_2 is not as the gold's


def test_new_task_ids_skip_taken_ones(env):
  episode = env.start(env.tasks()[0])
  episode.db.data["tasks"]["task_2"] = dict(episode.db.data["tasks"]["task_1"], task_id="task_2")
  del episode.db.data["tasks"]["task_1"]
  created = json.loads(execute(episode, "create_task", {"user_id": "user_1", "title": "B"}).text)
  assert created["task_id"] == "task_3"  # τ² would take task_2 (len + 1) and overwrite it


def test_action_matching():
  create = Action("a", "create_task", {"user_id": "user_1", "title": "T"})
  assert create.matches("create_task", {"title": "T", "user_id": "user_1"})
  assert not create.matches("create_task", {"user_id": "user_1", "title": "T", "description": "d"})
  assert not create.matches("update_task_status", {"user_id": "user_1", "title": "T"})
  transfer = Action("t", "transfer_to_human_agents", {"summary": "gold"}, compare_args=())
  assert transfer.matches("transfer_to_human_agents", {"summary": "anything"})
  only_title = Action("c", "create_task", {"user_id": "u1", "title": "T"}, compare_args=("title",))
  assert only_title.matches("create_task", {"user_id": "user_2", "title": "T"})


@pytest.mark.parametrize("raw, message", [
    ([], "tasks.json[0]: expected an object, got list"),
    ({"ticket": "t"}, "tasks.json[0]: missing 'id'"),
    ({"id": 3}, "tasks.json[0].id: expected str, got int"),
    ({"id": "a", "evaluation_criteria": {"reward_basis": ["DB", "VIBES"]}},
     "tasks.json[0] (id 'a').evaluation_criteria.reward_basis[1]: unknown reward type 'VIBES';"
     " one of ('DB', 'ENV_ASSERTION', 'ACTION', 'COMMUNICATE', 'NL_ASSERTION')"),
    ({"id": "a", "evaluation_criteria": {"actions": {"name": "x"}}},
     "tasks.json[0] (id 'a').evaluation_criteria.actions: expected list, got dict"),
    ({"id": "a", "evaluation_criteria": {"actions": [{"action_id": "1", "arguments": {}}]}},
     "tasks.json[0] (id 'a').evaluation_criteria.actions[0]: missing 'name'"),
    ({"id": "a", "evaluation_criteria": {"communicate_info": ["ok", 5]}},
     "tasks.json[0] (id 'a').evaluation_criteria.communicate_info[1]: expected str, got int"),
    ({"id": "a", "initial_state": {"initialization_actions": [{"env_type": "assistant"}]}},
     "tasks.json[0] (id 'a').initial_state.initialization_actions[0]: missing 'func_name'"),
])
def test_bad_tasks_name_the_field(raw, message):
  with pytest.raises(ConfigError) as err:
    parse_task(raw, "tasks.json[0]")
  assert str(err.value) == message


def test_default_reward_basis():
  task = parse_task({"id": "a", "ticket": "t", "evaluation_criteria": {}}, "t")
  assert task.criteria.reward_basis == ("DB", "COMMUNICATE") and task.criteria.actions is None


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
  """A writable copy of the mock domain as the data directory: its tasks, and how to save them."""
  folder = tmp_path / "tau2" / "domains" / "mock"
  shutil.copytree(data_path("tau2/domains/mock"), folder)
  for path in folder.iterdir():
    path.chmod(0o644)
  monkeypatch.setenv("TOOLORCH_DATA_DIR", str(tmp_path))
  tasks = json.loads((folder / "tasks.json").read_text())
  return tasks, lambda: (folder / "tasks.json").write_text(json.dumps(tasks))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t[1]["evaluation_criteria"]["env_assertions"][0].update(func_name="assert_vibes"),
     "evaluation_criteria.env_assertions[0].func_name: 'assert_vibes' is not a function of"
     " domain 'mock'"),
    (lambda t: t[6]["initial_state"]["initialization_actions"][0].update(env_type="user"),
     "initial_state.initialization_actions[0].env_type 'user' is not supported"),
    (lambda t: t[0]["evaluation_criteria"]["actions"][0].update(requestor="user"),
     "evaluation_criteria.actions[0].requestor 'user' is not supported: domain 'mock' has tools"
     " for ['assistant']"),
])
def test_tasks_the_domain_cannot_run_are_refused_at_load(data_copy, edit, message):
  tasks, write = data_copy
  edit(tasks)
  write()
  with pytest.raises(ConfigError, match="tasks.json \\(id '") as err:
    Tau2Environment(Settings(mode="solo"))
  assert message in str(err.value)


def test_configs(env):
  assert ENVIRONMENTS.resolve("tau2", "env.name") is Tau2Environment
  assert (env.settings.domain, env.settings.split) == ("mock", "base")
  with pytest.raises(ConfigError, match="domain 'bank' is not implemented yet; implemented: "):
    build_env(EnvConfig("tau2", {"domain": "bank"}))
  with pytest.raises(ConfigError, match="env.settings.split: unknown split 'test' of τ² domain"):
    load_env("tau2_mock", ["settings.split=test"])
  with pytest.raises(ConfigError, match="unknown key 'domian'"):
    build_env(EnvConfig("tau2", {"domian": "mock"}))
  with pytest.raises(ConfigError, match="unknown split 'train'"):
    env.tasks("train")
