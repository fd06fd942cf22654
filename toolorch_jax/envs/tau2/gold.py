"""The gold policy: the task's gold actions replayed as the agent's tool calls, then `done`.

A self-check of a domain's implementation: through the real episode loop it must score 1.0 on
every task with gold actions. `ScriptedPolicy(tokenizer, env.gold_script(task))` plays it; perturbed
action lists go through `replay_script` to check that the scorer notices a wrong call.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from toolorch_jax.envs.base import Script
from toolorch_jax.envs.tau2.data import Tau2Task
from toolorch_jax.envs.tau2.toolkit import DONE


def replay_script(calls: Sequence[tuple[str, Mapping[str, Any]]], say: str = "",
                  grouped: bool = False) -> Script:
  """The calls one per turn (or all in the first turn when `grouped`), then `done` alone.

  `say` is the text of the first turn, which always runs. The turn is chosen by counting the
  assistant messages so far, so one script serves any number of episodes of its task.
  """
  turns = [list(calls)] if grouped and calls else [[call] for call in calls]
  turns.append([(DONE, {})])

  def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    index = min(sum(m["role"] == "assistant" for m in messages), len(turns) - 1)
    tool_calls = [{"name": name, "arguments": dict(args)} for name, args in turns[index]]
    return {"role": "assistant", "content": say if index == 0 else "", "tool_calls": tool_calls}

  return script


def gold_script(spec: Tau2Task, grouped: bool = False) -> Script:
  """Replays the task's gold actions and says its `communicate_info`; a task without gold actions
  just calls `done`."""
  criteria = spec.criteria
  actions = (criteria.actions or ()) if criteria else ()
  say = "\n".join(criteria.communicate_info) if criteria else ""
  return replay_script([(a.name, a.arguments) for a in actions], say, grouped)



def dialogue_script(spec: Tau2Task, grouped: bool = False) -> Script:
  """The gold with a simulated user: the agent's gold actions (one per turn, or all in the first
  when `grouped`), then a message saying the task's `communicate_info`, repeated on every later
  turn while the user goes on (the user's own gold actions are the user's to make)."""
  criteria = spec.criteria
  calls = [(a.name, a.arguments) for a in (criteria.actions or ()) if a.requestor == "assistant"] \
      if criteria else []
  turns = [list(calls)] if grouped and calls else [[call] for call in calls]
  say = "\n".join(criteria.communicate_info) if criteria and criteria.communicate_info else \
      "Your request has been handled."

  def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    index = sum(m["role"] == "assistant" for m in messages) - 1  # the greeting is not a turn
    if index < len(turns):
      return {"role": "assistant", "content": "",
              "tool_calls": [{"name": name, "arguments": dict(args)} for name, args in turns[index]]}
    return {"role": "assistant", "content": say, "tool_calls": []}

  return script


def consulting(script: Script, name: str, arguments: Mapping[str, Any]) -> Script:
  """`script` preceded by one turn calling `name` (the orchestrator's gold asks an expert first);
  `script` sees the conversation without that turn, so it plays as it would alone."""
  consult = {"role": "assistant", "content": "",
             "tool_calls": [{"name": name, "arguments": dict(arguments)}]}

  def is_consult(message: dict[str, Any]) -> bool:
    calls = message.get("tool_calls") or ()  # {name, ...} as scripted, {function: {name}} as parsed
    names = [c.get("name") or c.get("function", {}).get("name") for c in calls]
    return message["role"] == "assistant" and names == [name]

  def wrapped(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    if not any(is_consult(m) for m in messages):
      return consult
    return script([m for m in messages if not is_consult(m)], tools)

  return wrapped
