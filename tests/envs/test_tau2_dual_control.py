"""Dual control on a small domain of our own: the mock domain's agent tools, plus a phone the user
controls (mobile data on or off). The agent must get the user to act; the user's calls run on the
user's database, unseen by the agent, and count in the reward."""

import asyncio
import json
import shutil

import pytest

from tests.tools.loopback import completion, serve
from toolorch_jax.datadir import data_dir, data_path
from toolorch_jax.envs import EnvConfig, build_env
from toolorch_jax.envs.tau2.env import DOMAINS
from toolorch_jax.envs.tau2.mock_tools import MOCK
from toolorch_jax.envs.tau2.toolkit import Domain, DomainTool
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.tokenizer import load_tokenizer


class SetMobileData(DomainTool):
  name = "set_mobile_data"
  description = "Turn the phone's mobile data on or off."
  parameters = {"type": "object", "properties": {"enabled": {"type": "boolean"}},
                "required": ["enabled"], "additionalProperties": False}

  def apply(self, arguments):
    self.db.data["device"]["mobile_data"] = arguments["enabled"]
    return f"Mobile data is now {'on' if arguments['enabled'] else 'off'}."


PHONE = Domain("phone", MOCK.tools, MOCK.assertions, MOCK.tables, user_tools=(SetMobileData,),
               user_assertions={"assert_mobile_data": lambda db, args:
                                db.data["device"]["mobile_data"] == args["enabled"]},
               user_db_file="user_db.json", solo_policy=None)
TASK = {
    "id": "data_and_task",
    "user_scenario": {"persona": None, "instructions": "Your mobile data is off; get help turning"
                      " it on, and ask for a task 'Fix phone' for user_1."},
    "evaluation_criteria": {
        "actions": [
            {"action_id": "a", "name": "create_task",
             "arguments": {"user_id": "user_1", "title": "Fix phone"}},
            {"action_id": "u", "name": "set_mobile_data", "arguments": {"enabled": True},
             "requestor": "user"}],
        "env_assertions": [{"env_type": "user", "func_name": "assert_mobile_data",
                            "arguments": {"enabled": True}}],
        "reward_basis": ["DB", "ENV_ASSERTION", "ACTION"]}}
ASKS = {"content": "My mobile data is off, and I need a task 'Fix phone' for user_1."}
TOGGLES = {"tool_calls": [{"name": "set_mobile_data", "arguments": {"enabled": True}}]}


@pytest.fixture
def phone_env(tmp_path, monkeypatch):
  """A data directory holding the shared data and the `phone` domain (mock's files, our task)."""
  shared = data_dir()
  root = tmp_path / "data"
  (root / "tau2" / "domains").mkdir(parents=True)
  for entry in shared.iterdir():
    if entry.name != "tau2":
      (root / entry.name).symlink_to(entry)
  (root / "tau2" / "user_simulator").symlink_to(shared / "tau2" / "user_simulator")
  folder = root / "tau2" / "domains" / "phone"
  shutil.copytree(shared / "tau2" / "domains" / "mock", folder)
  (folder / "tasks.json").write_text(json.dumps([TASK]))
  (folder / "split_tasks.json").write_text(json.dumps({"base": [TASK["id"]]}))
  (folder / "user_db.json").write_text(json.dumps({"device": {"mobile_data": False}}))
  monkeypatch.setenv("TOOLORCH_DATA_DIR", str(root))
  monkeypatch.setitem(DOMAINS, "phone", PHONE)

  def make(turns):
    script = tmp_path / "user.json"
    script.write_text(json.dumps({TASK["id"]: turns}))
    return build_env(EnvConfig("tau2", {"domain": "phone", "mode": "user", "user": {
        "kind": "scripted", "script": str(script)}}))

  return make


def play(env):
  qwen = load_tokenizer(data_path("qwen3"))
  (task,) = env.tasks()
  episode = env.start(task)
  policy = ScriptedPolicy(qwen, env.gold_script(task))
  return asyncio.run(run_episode(policy, episode, qwen, EpisodeConfig(max_turns=6))), episode


def test_the_user_acts_on_its_phone_and_the_reward_counts_it(phone_env):
  trajectory, episode = play(phone_env([ASKS, TOGGLES, {"content": "It works now. ###STOP###"}]))
  assert trajectory.outcome == 1.0 and episode.termination == "user_stop"
  assert episode.user.calls == [("set_mobile_data", {"enabled": True})]
  assert episode.calls == [("create_task", {"user_id": "user_1", "title": "Fix phone"})]
  # The agent was never shown the user's tools or calls, only the user's words.
  seen = json.dumps([t.observations for t in trajectory.turns] + [t.user for t in trajectory.turns])
  assert "set_mobile_data" not in seen and "It works now." in seen
  assert [c.name for c in trajectory.calls] == ["create_task"]
  # The user saw its own tool's result.
  assert any(m["role"] == "tool" and m["content"] == "Mobile data is now on."
             for m in episode.user.messages)


def test_a_user_who_never_acts_fails_the_task(phone_env):
  trajectory, episode = play(phone_env([ASKS, {"content": "Thanks. ###STOP###"}]))
  assert trajectory.outcome == 0.0 and episode.termination == "user_stop"
  assert episode.breakdown["db_match"] is False
  assert [a["matched"] for a in episode.breakdown["actions"]] == [True, False]
  assert episode.breakdown["env_assertions"][0]["met"] is False


def test_a_user_calling_a_tool_it_lacks_sees_an_error(phone_env):
  wrong = {"tool_calls": [{"name": "create_task", "arguments": {}}]}
  trajectory, episode = play(phone_env([ASKS, wrong, TOGGLES, {"content": "###STOP###"}]))
  assert trajectory.outcome == 1.0  # the error was an observation; the user went on
  assert any(m["role"] == "tool" and m["content"].startswith("Error: unknown tool 'create_task'")
             for m in episode.user.messages)


def test_the_gold_user_performs_the_actions_the_task_assigns_it(phone_env):
  phone_env([])  # the data directory and domain; the gold user needs no recorded turns
  gold = build_env(EnvConfig("tau2", {"domain": "phone", "mode": "user", "user": {"kind": "gold"}}))
  trajectory, episode = play(gold)
  assert episode.opening == TASK["user_scenario"]["instructions"]
  assert trajectory.outcome == 1.0 and episode.termination == "user_stop"
  assert episode.user.calls == [("set_mobile_data", {"enabled": True})]


def test_a_model_as_the_user_calls_its_own_tools(phone_env, tmp_path):
  phone_env([])  # the data directory and domain
  toggle = completion("", 50, 5)
  toggle["choices"][0]["message"]["tool_calls"] = [{"id": "t1", "type": "function", "function": {
      "name": "set_mobile_data", "arguments": json.dumps({"enabled": True})}}]
  replies = [("json", 200, completion(ASKS["content"], 50, 5)), ("json", 200, toggle),
             ("json", 200, completion("Data is on. ###STOP###", 50, 5))]
  toolset = tmp_path / "models.yaml"
  with serve(replies) as server:
    toolset.write_text(f"models:\n  sim: {{base_url: {server.url}/v1}}\n")
    env = build_env(EnvConfig("tau2", {"domain": "phone", "mode": "user", "user": {
        "kind": "llm", "toolset": str(toolset), "model": "sim", "retry": {"max_attempts": 1}}}))
    trajectory, episode = play(env)
  assert trajectory.outcome == 1.0 and episode.user.calls == [("set_mobile_data", {"enabled": True})]
  first, second, third = (seen.body for seen in server.requests)
  assert [t["function"]["name"] for t in first["tools"]] == ["set_mobile_data"]
  assert "You have some tools" in first["messages"][0]["content"]  # the guidelines with tools
  call, result = third["messages"][-2:]
  assert call["tool_calls"][0]["function"] == {"name": "set_mobile_data",
                                               "arguments": '{"enabled": true}'}
  assert result == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                    "name": "set_mobile_data", "content": "Mobile data is now on."}
  assert second["messages"][-1]["role"] == "user"  # the agent's words came before the toggle
