"""The τ² mock domain in solo mode through the real episode loop: gold, perturbations, endings."""

import asyncio

import pytest

from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_episode
from toolorch_jax.datadir import data_path
from toolorch_jax.envs import load_env
from toolorch_jax.envs.tau2 import replay_script
from toolorch_jax.envs.tau2.mock_tools import MOCK
from toolorch_jax.envs.tau2.toolkit import replay
from toolorch_jax.tokenizer import load_tokenizer

TICKETED = ["create_task_1", "create_task_1_with_env_assertions", "create_task_1_nl_eval",
            "update_task_1", "update_task_with_initialization_data",
            "update_task_with_initialization_actions", "impossible_task_1"]


@pytest.fixture(scope="module")
def qwen():
  return load_tokenizer(data_path("qwen3"))


@pytest.fixture(scope="module")
def env():
  return load_env("tau2_mock")


def play(env, qwen, task, script, config=EpisodeConfig()):
  episode = env.start(task)
  trajectory = asyncio.run(run_episode(ScriptedPolicy(qwen, script), episode, qwen, config))
  return trajectory, episode


def gold_calls(task):
  return [(a.name, dict(a.arguments)) for a in task.answer.criteria.actions or ()]


def gold_say(task):
  return "\n".join(task.answer.criteria.communicate_info)


def changed(calls, tool, **update):
  return [(name, {**args, **update}) if name == tool else (name, args) for name, args in calls]


def wrong_status(calls):
  """update_task_status with the other allowed status, 'pending' (the gold says 'completed')."""
  return changed(calls, "update_task_status", status="pending")


def wrong_title(calls):
  return changed(calls, "create_task", title="Unimportant Meeting")


def missing_call(calls):
  """The only gold call of every mock task, dropped: the agent goes straight to `done`."""
  return calls[1:]


PERTURBATIONS = {"wrong status": (wrong_status, "update_task_status"),
                 "wrong title": (wrong_title, "create_task"),
                 "missing call": (missing_call, None)}


@pytest.fixture(scope="module")
def table(env, qwen):
  """task id -> {column: reward}; a perturbation applies where the task has the call it changes."""
  rows = {}
  for task in env.tasks():
    calls = gold_calls(task)
    row = {"gold": play(env, qwen, task, env.gold_script(task))[0].outcome,
           "gold grouped": play(env, qwen, task, env.gold_script(task, grouped=True))[0].outcome}
    for column, (perturb, needs) in PERTURBATIONS.items():
      if calls and (needs is None or any(name == needs for name, _ in calls)):
        script = replay_script(perturb(calls), gold_say(task))
        row[column] = play(env, qwen, task, script)[0].outcome
    rows[task.task_id] = row
  return rows


def test_solo_tasks_prompt_and_tools(env):
  assert [t.task_id for t in env.tasks()] == TICKETED == [t.task_id for t in env.tasks("base")]
  assert sorted(env.skipped) == ["update_task_with_history_and_env_assertions",
                                 "update_task_with_message_history"]
  assert all(reason.startswith("no ticket") for reason in env.skipped.values())
  episode = env.start(env.tasks()[3])
  system, user = episode.messages()
  assert "Task status can only be \"pending\" or \"completed\"" in system["content"]
  assert "`done`" in system["content"]
  assert user == {"role": "user",
                  "content": "User needs to update the status of task_1 to completed."}
  names = [s["function"]["name"] for s in episode.tool_schemas()]
  assert names == ["create_task", "get_users", "update_task_status", "transfer_to_human_agents",
                   "done"]


def test_results_table(table):
  """Gold scores 1.0 on every solo task (also grouped in one turn); each perturbation scores 0."""
  columns = ["gold", "gold grouped", *PERTURBATIONS]
  print("\nτ² mock, solo mode, through run_episode with the Qwen3 tokenizer")
  print(f"{'task':42}" + "".join(f"{c:>14}" for c in columns))
  for task_id, row in table.items():
    cells = [f"{row[c]:>14.1f}" if c in row else f"{'n/a':>14}" for c in columns]
    print(f"{task_id:42}" + "".join(cells))
  assert table == {
      "create_task_1": {"gold": 1.0, "gold grouped": 1.0, "wrong title": 0.0, "missing call": 0.0},
      "create_task_1_with_env_assertions": {"gold": 1.0, "gold grouped": 1.0, "wrong title": 0.0,
                                            "missing call": 0.0},
      "create_task_1_nl_eval": {"gold": 1.0, "gold grouped": 1.0},  # no gold actions: done only
      "update_task_1": {"gold": 1.0, "gold grouped": 1.0, "wrong status": 0.0, "missing call": 0.0},
      "update_task_with_initialization_data": {"gold": 1.0, "gold grouped": 1.0,
                                               "wrong status": 0.0, "missing call": 0.0},
      "update_task_with_initialization_actions": {"gold": 1.0, "gold grouped": 1.0,
                                                  "wrong status": 0.0, "missing call": 0.0},
      "impossible_task_1": {"gold": 1.0, "gold grouped": 1.0, "missing call": 0.0},
  }


def task_by_id(env, task_id):
  return next(t for t in env.tasks() if t.task_id == task_id)


def test_gold_episode_details(env, qwen):
  task = task_by_id(env, "update_task_with_initialization_data")
  trajectory, episode = play(env, qwen, task, env.gold_script(task))
  assert (trajectory.finish, trajectory.faults) == ("env", {})
  assert [c.name for c in trajectory.calls] == ["update_task_status", "done"]
  assert episode.ended_by == "done"
  assert episode.breakdown["rewards"] == {"DB": 1.0, "COMMUNICATE": 1.0}
  assert episode.breakdown["gold_errors"] == []
  # The live database equals the scorer's replay of the gold actions on a fresh initial state.
  gold = env.initial_db(task.answer)
  assert replay(MOCK.bind(gold), gold_calls(task)) == []
  assert episode.db.hash() == gold.hash() != episode.initial.hash()


def test_which_check_fails(env, qwen):
  """Wrong title: the DB differs although the env assertion (task_2 pending) still holds."""
  task = task_by_id(env, "create_task_1_with_env_assertions")
  _, episode = play(env, qwen, task, replay_script(wrong_title(gold_calls(task))))
  assert episode.breakdown["db_match"] is False
  assert episode.breakdown["rewards"] == {"DB": 0.0, "ENV_ASSERTION": 1.0}
  # Missing create_task: no task_2, so the assertion fails too (and says why).
  _, episode = play(env, qwen, task, replay_script([]))
  assert episode.breakdown["rewards"] == {"DB": 0.0, "ENV_ASSERTION": 0.0}
  assert "task 'task_2' not found" in episode.breakdown["env_assertions"][0]["error"]
  # The transfer task without its transfer: the DB is untouched (1) but the gold action is missing.
  task = task_by_id(env, "impossible_task_1")
  _, episode = play(env, qwen, task, replay_script([]))
  assert episode.breakdown["rewards"] == {"DB": 1.0, "ACTION": 0.0}
  # Communicate: the gold update without saying the required sentences.
  task = task_by_id(env, "update_task_with_initialization_data")
  trajectory, episode = play(env, qwen, task, replay_script(gold_calls(task)))
  assert trajectory.outcome == 0.0
  assert episode.breakdown["rewards"] == {"DB": 1.0, "COMMUNICATE": 0.0}


@pytest.mark.parametrize("summary", ["", "x", "Please delete all my tasks.", "Alle löschen! " * 20])
def test_transfer_only_task_passes_with_any_summary(env, qwen, summary):
  task = task_by_id(env, "impossible_task_1")
  script = replay_script([("transfer_to_human_agents", {"summary": summary})])
  trajectory, episode = play(env, qwen, task, script)
  assert trajectory.outcome == 1.0
  assert len(trajectory.turns) == 1  # the transfer ended the episode: no `done` needed
  assert episode.ended_by == "transfer_to_human_agents"


def test_premature_termination_scores_zero(env, qwen):
  task = task_by_id(env, "update_task_1")
  calls = gold_calls(task)

  def no_done(messages, tools):
    if messages[-1]["role"] == "user":
      return {"role": "assistant", "content": "",
              "tool_calls": [{"name": n, "arguments": a} for n, a in calls]}
    return {"role": "assistant", "content": "The task is completed."}  # ends without `done`

  trajectory, episode = play(env, qwen, task, no_done)
  assert (trajectory.finish, trajectory.outcome) == ("no_tool_call", 0.0)
  assert episode.breakdown == {"premature": True}
  assert episode.db.hash() != episode.initial.hash()  # the right change was made, yet it scores 0
  trajectory, _ = play(env, qwen, task, env.gold_script(task), EpisodeConfig(max_turns=1))
  assert (trajectory.finish, trajectory.outcome) == ("max_turns", 0.0)
  trajectory, _ = play(env, qwen, task, env.gold_script(task), EpisodeConfig(max_context=300))
  assert (trajectory.finish, trajectory.outcome) == ("context", 0.0)


def test_calls_beside_done_are_not_run(env, qwen):
  task = task_by_id(env, "update_task_1")
  done_too = lambda m, t: {"role": "assistant", "content": "", "tool_calls": [
      {"name": n, "arguments": a} for n, a in gold_calls(task) + [("done", {})]]}
  trajectory, episode = play(env, qwen, task, done_too)
  assert trajectory.calls[0].error == "not run: 'done' ended the episode"
  assert episode.calls == [] and trajectory.outcome == 0.0


def test_failed_calls_are_observations_and_change_nothing(env, qwen):
  task = task_by_id(env, "create_task_1")
  bad = [("create_task", {"user_id": "user_9", "title": "Important Meeting"}),
         ("create_task", {"user_id": "user_1"}),
         ("update_task_status", {"task_id": "task_1", "status": "archived"})]
  trajectory, episode = play(env, qwen, task, replay_script(bad + gold_calls(task)))
  assert trajectory.faults == {"tool_error": 3}
  assert [t.observations[0] for t in trajectory.turns[:3]] == [
      "Error: user 'user_9' not found",
      "Error: bad arguments for 'create_task': 'title' is a required property",
      "Error: bad arguments for 'update_task_status': 'status': 'archived' is not one of"
      " ['pending', 'completed']"]
  assert trajectory.outcome == 1.0  # the failed calls left the database as it was
