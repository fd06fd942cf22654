"""The episode loop with a scripted policy (known turns) and with the real in-process engine."""

import asyncio
import json

import pytest

from tests.rollout.scripted_env import KeyValueEnv
from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, Trajectory, run_episode, run_groups
from toolorch_jax.rollout.policy import encode_assistant
from toolorch_jax.datadir import data_path
from toolorch_jax.tokenizer import load_tokenizer, render_chat


@pytest.fixture(scope="module")
def qwen():
  return load_tokenizer(data_path("qwen3"))


def two_step_script(messages, tools):
  """Turn 1: two lookups at once; turn 2: the answer from what the tools said."""
  if messages[-1]["role"] == "user":
    return {"role": "assistant", "content": "", "reasoning_content": "I need two facts.",
            "tool_calls": [{"name": "lookup", "arguments": {"key": "capital_fr"}},
                           {"name": "lookup", "arguments": {"key": "river_fr"}}]}
  seen = [m["content"] for m in messages if m["role"] == "tool"]
  return {"role": "assistant", "content": "", "reasoning_content": "Done.",
          "tool_calls": [{"name": "answer", "arguments": {"text": seen[0]}}]}


def test_turns_ids_masks_and_costs(qwen):
  env = KeyValueEnv()
  task = env.tasks()[0]
  policy = ScriptedPolicy(qwen, two_step_script)
  trajectory = asyncio.run(run_episode(policy, env.start(task), qwen, EpisodeConfig(), group_id=4))
  assert trajectory.finish == "env" and trajectory.outcome == 1.0 and trajectory.group_id == 4
  assert [len(t.observations) for t in trajectory.turns] == [2, 1]
  assert [(c.turn, c.name, c.result) for c in trajectory.calls] == [
      (0, "lookup", "Paris"), (0, "lookup", "Seine"), (1, "answer", "answer recorded")]
  assert trajectory.cost_usd == pytest.approx(0.02) and trajectory.tool_counts == {"lookup": 2, "answer": 1}
  assert trajectory.preference["cost"] == 0.5

  # The ids are the tokenised conversation; policy tokens are exactly the two assistant turns.
  episode = env.start(task)
  first, second = two_step_script(episode.messages(), None), None
  history = episode.messages() + [first, {"role": "tool", "content": "Paris"},
                                   {"role": "tool", "content": "Seine"}]
  second = two_step_script(history, None)
  prompt = qwen.encode(render_chat(history, episode.tool_schemas(), add_generation_prompt=True))
  assert trajectory.token_ids[:len(prompt)] == prompt
  assert trajectory.token_ids[len(prompt):] == encode_assistant(qwen, second, True)
  policy_ids = [i for i, m in zip(trajectory.token_ids, trajectory.loss_mask) if m]
  assert policy_ids == encode_assistant(qwen, first, True) + encode_assistant(qwen, second, True)
  assert len(trajectory.logprobs) == len(trajectory.token_ids)


def test_groups_share_ids_and_run_concurrently(qwen):
  env = KeyValueEnv(delay_s=0.3)
  policy = ScriptedPolicy(qwen, two_step_script)
  trajectories = asyncio.run(run_groups(env, policy, env.tasks(), 4, qwen, EpisodeConfig(), first_group_id=10))
  assert [t.group_id for t in trajectories] == [10] * 4 + [11] * 4
  assert len({t.episode_id for t in trajectories}) == 8
  # 8 episodes x 2 lookups of 0.3 s each ran at once, not one after another (2 x 0.3 s per episode).
  assert all(t.wall_s < 1.5 for t in trajectories)


def test_malformed_calls_and_unknown_tools_are_observations(qwen):
  env = KeyValueEnv()
  turns = iter([
      '<tool_call>\n{"name": "lookup", "arguments": {"key": }\n</tool_call>',  # malformed JSON
      '<tool_call>\n{"name": "teleport", "arguments": {}}\n</tool_call>',  # unknown tool
      '<tool_call>\n{"name": "lookup", "arguments": {"key": "nope"}}\n</tool_call>',  # tool error
      '<tool_call>\n{"name": "answer", "arguments": {"text": "Paris"}}\n</tool_call>',
  ])
  policy = ScriptedPolicy(qwen, lambda m, t: {"role": "assistant", "content": next(turns)})
  trajectory = asyncio.run(run_episode(policy, env.start(env.tasks()[0]), qwen, EpisodeConfig()))
  assert trajectory.outcome == 1.0
  assert trajectory.faults == {"parse_malformed_json": 1, "parse_unknown_tool": 1, "tool_error": 1}
  shown = [t.observations[0] for t in trajectory.turns[:3]]
  assert shown[0].startswith("Error: tool call is not valid JSON")
  assert shown[1].startswith("Error: unknown tool 'teleport'")
  assert shown[2] == "Error: no fact named 'nope'"


def test_limits_end_episodes(qwen):
  env = KeyValueEnv()
  loop = lambda m, t: {"role": "assistant", "content": "",
                       "tool_calls": [{"name": "lookup", "arguments": {"key": "capital_jp"}}]}
  policy = ScriptedPolicy(qwen, loop)
  by_turns = asyncio.run(run_episode(policy, env.start(env.tasks()[1]), qwen, EpisodeConfig(max_turns=3)))
  assert by_turns.finish == "max_turns" and len(by_turns.turns) == 3 and by_turns.outcome == 0.0
  by_context = asyncio.run(run_episode(policy, env.start(env.tasks()[1]), qwen,
                                       EpisodeConfig(max_context=by_turns.prompt_length + 60)))
  assert by_context.finish in ("context", "truncated") and len(by_context.token_ids) <= by_turns.prompt_length + 60
  text_only = ScriptedPolicy(qwen, lambda m, t: {"role": "assistant", "content": "Paris"})
  answered = asyncio.run(run_episode(text_only, env.start(env.tasks()[0]), qwen, EpisodeConfig()))
  assert answered.finish == "no_tool_call" and answered.outcome == 0.0  # this env needs `answer`


def test_trajectory_round_trips_through_json(qwen):
  env = KeyValueEnv()
  trajectory = asyncio.run(run_episode(ScriptedPolicy(qwen, two_step_script), env.start(env.tasks()[0]),
                                       qwen, EpisodeConfig()))
  again = Trajectory.from_dict(json.loads(trajectory.to_json()))
  assert again == trajectory
