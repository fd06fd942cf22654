"""Orchestrator mode on τ²: the domain tools plus `call_expert`, answered offline by recorded
experts (a recorded_expert tool over a small table written here), with a recorded user."""

import asyncio

import pytest

from tests.envs.recorded_experts import ADVICE, GOLD_ADVICE, QUESTION, write_recorded_experts
from toolorch_jax.config import ConfigError
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import load_env
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.tokenizer import load_tokenizer
from toolorch_jax.tools.pricing import estimate_tokens

@pytest.fixture
def toolset(tmp_path):
  return write_recorded_experts(tmp_path)


def turn(*calls, say=""):
  return {"role": "assistant", "content": say,
          "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}


def play(env, script_turns, task_id="create_task_1"):
  qwen = load_tokenizer(data_path("qwen3"))
  task = next(t for t in env.tasks() if t.task_id == task_id)
  episode = env.start(task)
  greeting = episode.user is not None  # with a user, the first assistant message is the greeting
  script = lambda messages, tools: script_turns[min(sum(m["role"] == "assistant" for m in messages)
                                                    - greeting, len(script_turns) - 1)]
  trajectory = asyncio.run(run_episode(ScriptedPolicy(qwen, script), episode, qwen,
                                       EpisodeConfig(max_turns=6)))
  return trajectory, episode


def test_call_expert_with_recorded_experts(toolset):
  env = load_env("tau2_mock_user", ["settings.agent=orchestrator", f"settings.toolset={toolset}"])
  create = ("create_task", {"user_id": "user_1", "title": "Important Meeting"})
  trajectory, episode = play(env, [
      turn(("call_expert", {"expert": "expert-1", "question": QUESTION})),
      turn(("call_expert", {"expert": "expert-2", "question": "Something never recorded?"})),
      turn(create), turn(say="Your task is created.")])
  schemas = {s["function"]["name"]: s["function"] for s in episode.tool_schemas()}
  assert "expert-1 | $1.25 | $10" in schemas["call_expert"]["description"]
  assert schemas["call_expert"]["parameters"]["properties"]["expert"]["enum"] == ["expert-1",
                                                                                  "expert-2"]
  asked, missing = trajectory.calls[:2]
  assert asked.result == ADVICE and asked.error is None
  assert "no recorded response" in missing.error  # an observation, not a crash
  assert trajectory.tool_counts == {"expert-1": 1, "expert-2": 1, "create_task": 1}
  # The expert was paid by the tokens of its whole prompt (policy and conversation included).
  assert asked.cost_usd > 1.25 * estimate_tokens(QUESTION) / 1e6
  assert trajectory.cost_usd == pytest.approx(asked.cost_usd + missing.cost_usd)
  # Expert calls are not domain calls: the reward sees only create_task, and it is the gold.
  assert episode.calls == [create]
  assert trajectory.outcome == 1.0 and episode.termination == "user_stop"


def test_solo_orchestrator_and_bad_expert_settings(toolset):
  env = load_env("tau2_mock", ["settings.agent=orchestrator", f"settings.toolset={toolset}"])
  trajectory, episode = play(env, [
      turn(("call_expert", {"expert": "expert-1", "question": QUESTION})),
      turn(("create_task", {"user_id": "user_1", "title": "Important Meeting"})),
      turn(("done", {}))])
  assert trajectory.outcome == 1.0 and trajectory.calls[0].result == ADVICE
  with pytest.raises(ConfigError, match="env.settings.expert_tool: the tool set .* has no tool"
                     " 'nope'"):
    load_env("tau2_mock", ["settings.agent=orchestrator", f"settings.toolset={toolset}",
                           "settings.expert_tool=nope"])
  with pytest.raises(ConfigError, match="env.settings.agent: unknown value 'boss'"):
    load_env("tau2_mock", ["settings.agent=boss"])


def test_the_gold_may_consult_an_expert_first(toolset):
  env = load_env("tau2_mock_user", ["settings.agent=orchestrator", f"settings.toolset={toolset}",
                                    "settings.gold_consult=expert-1"])
  for task in env.tasks():
    trajectory, episode = _gold(env, task)
    assert trajectory.outcome == 1.0, task.task_id
    assert trajectory.calls[0].name == "call_expert" and trajectory.calls[0].result == GOLD_ADVICE
    assert trajectory.cost_usd > 0 and trajectory.tool_counts["expert-1"] == 1
  (demo,) = env.demonstrations(env.tasks()[:1], 1, seed=0)
  assert demo["messages"][3]["tool_calls"][0]["name"] == "call_expert"
  assert demo["messages"][4] == {"role": "tool", "content": GOLD_ADVICE, "name": "call_expert"}
  with pytest.raises(ConfigError, match="env.settings.gold_consult: 'expert-9' is not an expert"):
    load_env("tau2_mock_user", ["settings.agent=orchestrator", f"settings.toolset={toolset}",
                                "settings.gold_consult=expert-9"])


def _gold(env, task):
  qwen = load_tokenizer(data_path("qwen3"))
  episode = env.start(task)
  trajectory = asyncio.run(run_episode(ScriptedPolicy(qwen, env.gold_script(task)), episode, qwen,
                                       EpisodeConfig(max_turns=6)))
  return trajectory, episode
