"""τ² with a simulated user: a model behind a real OpenAI-compatible server on 127.0.0.1 (normal
dialogue, a stop token, a malformed reply, a timeout), and recorded users on the mock domain."""

import asyncio
import json

import pytest

from tests.tools.loopback import completion, serve
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import EnvConfig, build_env, load_env
from toolorch_jax.envs.tau2.user_sim import GREETING, render_scenario
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.rollout.trajectory import EpisodeEnd
from toolorch_jax.tokenizer import load_tokenizer

FAST = {"max_attempts": 1, "backoff_s": 0.01, "max_backoff_s": 0.01, "timeout_s": 0.5}


@pytest.fixture(scope="module")
def qwen():
  return load_tokenizer(data_path("qwen3"))


def llm_env(tmp_path, url, **user):
  """The mock domain with a model as its user: a tool set naming the loopback server."""
  toolset = tmp_path / "user_models.yaml"
  toolset.write_text(f"""
models:
  simulated-user:
    base_url: {url}/v1
    price: {{per_mtok_input: 2.0, per_mtok_output: 8.0}}
""")
  return build_env(EnvConfig("tau2", {"domain": "mock", "mode": "user", "user": {
      "kind": "llm", "toolset": str(toolset), "model": "simulated-user", "retry": FAST, **user}}))


def play(env, qwen, task_id, script=None):
  task = next(t for t in env.tasks() if t.task_id == task_id)
  episode = env.start(task)
  policy = ScriptedPolicy(qwen, script or env.gold_script(task))
  trajectory = asyncio.run(run_episode(policy, episode, qwen, EpisodeConfig(max_turns=8)))
  return trajectory, episode


def user_says(*texts):
  """Server replies: the user's messages in order (usage 100 in, 10 out each)."""
  return [("json", 200, completion(text, 100, 10)) for text in texts]


def test_normal_dialogue_with_a_model_as_the_user(tmp_path, qwen):
  replies = user_says("Hi, please create a task called 'Important Meeting' for user_1.",
                      "Thank you, that is all. ###STOP###")
  with serve(replies) as server:
    env = llm_env(tmp_path, server.url, temperature=0.0)
    trajectory, episode = play(env, qwen, "create_task_1")
  assert trajectory.outcome == 1.0 and episode.termination == "user_stop"
  assert trajectory.finish == EpisodeEnd.ENV
  # The user's cost is its own: 2 requests of 100 + 10 tokens at $2 / $8 per million.
  assert trajectory.user_cost_usd == pytest.approx(2 * (100 * 2.0 + 10 * 8.0) / 1e6)
  assert trajectory.cost_usd == 0.0
  first, second = (seen.body for seen in server.requests)
  assert first["model"] == "simulated-user" and first["temperature"] == 0.0
  assert "tools" not in first  # the mock user has no tools of its own
  # Roles are swapped for the simulator: the agent speaks as `user`, the simulated user answers.
  assert [m["role"] for m in first["messages"]] == ["system", "user"]
  assert first["messages"][1]["content"] == GREETING
  system = first["messages"][0]["content"]
  assert "###STOP###" in system and "Create a new task called 'Important Meeting'" in system
  assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
  # The user sees the agent's words, never its calls: the agent's create_task is not there.
  assert "create_task" not in json.dumps(second["messages"])
  assert trajectory.turns[-1].user == "Thank you, that is all. ###STOP###"


def test_a_transfer_stop_token_ends_the_conversation(tmp_path, qwen):
  with serve(user_says("I want to delete all my tasks.", "###TRANSFER###")) as server:
    env = llm_env(tmp_path, server.url)
    trajectory, episode = play(env, qwen, "impossible_task_1")
  assert episode.termination == "user_stop" and trajectory.outcome == 1.0


def test_a_malformed_reply_ends_the_episode_as_a_user_error(tmp_path, qwen):
  replies = [*user_says("Please mark task_1 as completed."),
             ("json", 200, {"choices": []})]  # no message at all
  with serve(replies) as server:
    env = llm_env(tmp_path, server.url)
    trajectory, episode = play(env, qwen, "update_task_1")
  assert episode.termination == "user_error" and trajectory.outcome == 0.0
  assert "malformed response" in episode.breakdown["user_error"]
  assert episode.breakdown["premature"] is True


def test_a_tool_call_with_broken_arguments_is_a_malformed_reply(tmp_path, qwen):
  broken = completion("", 5, 5)
  broken["choices"][0]["message"]["tool_calls"] = [
      {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{not json"}}]
  with serve([("json", 200, broken)]) as server:
    env = llm_env(tmp_path, server.url)
    trajectory, episode = play(env, qwen, "update_task_1")
  assert episode.termination == "user_error" and trajectory.outcome == 0.0
  assert "arguments are not JSON" in episode.breakdown["user_error"]
  assert trajectory.turns == []  # the user failed before the agent's first turn


def test_a_timeout_ends_the_episode_as_a_user_error(tmp_path, qwen):
  replies = [*user_says("Please mark task_1 as completed."),
             ("slow", 2.0, user_says("too late")[0])]
  with serve(replies) as server:
    env = llm_env(tmp_path, server.url)
    trajectory, episode = play(env, qwen, "update_task_1")
  assert episode.termination == "user_error" and trajectory.outcome == 0.0
  assert "timeout after 0.5 s" in episode.breakdown["user_error"]


def test_recorded_user_gold_and_a_wrong_agent(qwen):
  env = load_env("tau2_mock_user")
  assert sorted(env.skipped) == ["update_task_with_history_and_env_assertions",
                                 "update_task_with_message_history"]
  for task in env.tasks():
    trajectory, episode = play(env, qwen, task.task_id)
    assert (trajectory.outcome, episode.termination) == (1.0, "user_stop"), task.task_id
  wrong = lambda messages, tools: {"role": "assistant", "content": "", "tool_calls": [
      {"name": "update_task_status", "arguments": {"task_id": "task_1", "status": "pending"}}]} \
      if len(messages) < 4 else {"role": "assistant", "content": "Done.", "tool_calls": []}
  trajectory, episode = play(env, qwen, "update_task_1", wrong)
  assert episode.termination == "user_stop" and trajectory.outcome == 0.0
  assert episode.breakdown["db_match"] is False


def test_the_agent_saying_stop_ends_it_and_limits_end_it_prematurely(qwen):
  stop = lambda messages, tools: {"role": "assistant", "content": "###STOP###", "tool_calls": []}
  trajectory, episode = play(load_env("tau2_mock_user"), qwen, "create_task_1", stop)
  assert episode.termination == "agent_stop" and trajectory.outcome == 0.0  # nothing created
  assert episode.breakdown["premature"] is False
  env = load_env("tau2_mock_user", ["settings.max_steps=3"])
  trajectory, episode = play(env, qwen, "create_task_1")
  assert episode.termination == "max_steps" and trajectory.outcome == 0.0
  errors = lambda messages, tools: {"role": "assistant", "content": "", "tool_calls": [
      {"name": "update_task_status", "arguments": {"task_id": "nope", "status": "completed"}}]}
  env = load_env("tau2_mock_user", ["settings.max_errors=2"])
  trajectory, episode = play(env, qwen, "update_task_1", errors)
  assert episode.termination == "too_many_errors" and trajectory.outcome == 0.0


def test_scenarios_render_as_the_simulator_reads_them():
  text = render_scenario({"persona": "Calm.", "instructions": {
      "domain": "airline", "reason_for_call": "Cancel EHGLP3.", "known_info": "I am Emma.",
      "unknown_info": None, "task_instructions": "Insist once."}})
  assert text == ("Persona:\nCalm.\n\nInstructions:\nDomain:\nairline\nReason for call:\n"
                  "Cancel EHGLP3.\nKnown info:\nI am Emma.\nTask instructions:\nInsist once.")
