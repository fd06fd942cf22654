"""Replay of τ²-bench results files through our domains: same outputs? same reward?

A results file (τ²'s own format: `tasks`, and `simulations` with `messages`, `reward_info`,
`termination_reason`) records every tool call and the tool message τ² answered. Each simulation's
calls are run again, in order, on fresh databases of our domain (the agent's calls on the agent's
db, the user's on the user's), each output is checked against the recorded one, and the episode is
scored again with our τ² reward. Recorded calls are paired with tool messages by order, not by id
(some agents reuse ids). Outputs compare as JSON (text where a side is not JSON); a failing call
compares by its error flag, since τ²'s argument-validation messages embed a library version.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
from typing import Any, Mapping

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import Tau2Task, parse_task
from toolorch_jax.envs.tau2.toolkit import Sides

ENDED = ("user_stop", "agent_stop")  # τ²'s chosen endings; any other is premature


@dataclasses.dataclass
class Replayed:
  """One simulation replayed: our reward beside the recorded one, and each output mismatch."""

  task_id: str
  trial: int
  reward: float
  recorded_reward: float
  outputs_matched: int
  outputs_total: int
  breakdown: dict[str, Any]
  mismatches: list[dict[str, Any]]
  scored: bool  # False: the reward needs an NL judge alone, so it is left out of the comparison

  @property
  def reward_equal(self) -> bool:
    return abs(self.reward - self.recorded_reward) < 1e-9

  def row(self) -> dict[str, Any]:
    return {"task_id": self.task_id, "trial": self.trial, "reward": self.reward,
            "recorded_reward": self.recorded_reward, "reward_equal": self.reward_equal,
            "outputs_matched": self.outputs_matched, "outputs_total": self.outputs_total,
            "components": self.breakdown.get("rewards", {}), "scored": self.scored,
            "mismatches": self.mismatches, "breakdown": self.breakdown}


def _json_or_text(text: Any) -> Any:
  if not isinstance(text, str):
    return text
  try:
    return json.loads(text)
  except json.JSONDecodeError:
    return text


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
  value = obj.get(key)
  if not isinstance(value, kind):
    raise ConfigError(f"{where}: '{key}' must be a {kind.__name__}, got {type(value).__name__}")
  return value


def load_results(path: str | pathlib.Path) -> tuple[dict[str, Tau2Task], list[dict[str, Any]]]:
  """The tasks by id and the simulations of a τ² results file; errors name the file and entry."""
  path = pathlib.Path(path)
  try:
    raw = json.loads(path.read_text(encoding="utf-8"))
  except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
    raise ConfigError(f"--replay {path}: cannot read a τ² results file: {err}") from None
  if not isinstance(raw, dict):
    raise ConfigError(f"{path}: expected a τ² results object with 'tasks' and 'simulations'")
  tasks = [parse_task(task, f"{path} tasks[{i}]")
           for i, task in enumerate(_field(raw, "tasks", list, str(path)))]
  simulations = _field(raw, "simulations", list, str(path))
  for i, simulation in enumerate(simulations):
    where = f"{path} simulations[{i}]"
    if not isinstance(simulation, dict):
      raise ConfigError(f"{where}: expected an object")
    _field(simulation, "task_id", str, where)
    _field(simulation, "messages", list, where)
  return {task.id: task for task in tasks}, simulations


def replay_simulation(env: Any, task: Tau2Task, simulation: Mapping[str, Any],
                      where: str) -> Replayed:
  """One simulation's calls through `env`'s domain (a Tau2Environment), then our reward."""
  domain = env.domain
  agent_start, user_start = env.initial_dbs(task)
  messages = simulation["messages"]
  solo = not any(message.get("role") == "user" for message in messages)  # τ²'s solo mode
  sides = Sides(domain, agent_start.copy(), user_start and user_start.copy(), solo)
  calls: dict[str, list[tuple[str, Any]]] = {"assistant": [], "user": []}
  order: list[str] = []
  pending: collections.deque = collections.deque()
  texts, mismatches, total = [], [], 0
  for index, message in enumerate(messages):
    role = message.get("role")
    if role == "assistant" and message.get("content"):
      texts.append(message["content"])
    if role in ("assistant", "user"):
      for call in message.get("tool_calls") or ():
        pending.append((index, call, call.get("requestor") or role))
    elif role == "tool":
      if not pending:
        raise ConfigError(f"{where}.messages[{index}]: a tool message with no call before it")
      call_index, call, side = pending.popleft()
      if side not in calls:
        raise ConfigError(f"{where}.messages[{call_index}]: unknown requestor '{side}'")
      name, arguments = call.get("name"), call.get("arguments") or {}
      calls[side].append((name, arguments))
      order.append(side)
      outcome = sides.call(side, name, arguments)
      total += 1
      recorded_error = bool(message.get("error"))
      if recorded_error or outcome.error:
        same = recorded_error == outcome.error
        reason = (f"error flag: recorded {recorded_error}, ours {outcome.error}"
                  f" (ours: {outcome.text[:200]!r}; recorded: {str(message.get('content'))[:200]!r})")
      else:
        same = _json_or_text(outcome.text) == _json_or_text(message.get("content"))
        reason = (f"output differs (ours: {outcome.text[:200]!r};"
                  f" recorded: {str(message.get('content'))[:200]!r})")
      if not same:
        mismatches.append({"message": index, "tool": name, "requestor": side, "reason": reason})
  ended = simulation.get("termination_reason") in ENDED
  reward, breakdown = scoring.score(domain, task, agent_start, calls["assistant"], texts, ended,
                                    user_initial=user_start, user_calls=calls["user"], order=order,
                                    solo=solo)
  basis = set(task.criteria.reward_basis) if task.criteria else set()
  recorded = (simulation.get("reward_info") or {}).get("reward")
  return Replayed(simulation["task_id"], int(simulation.get("trial") or 0), reward,
                  float(recorded) if recorded is not None else float("nan"), total - len(mismatches),
                  total, breakdown, mismatches, basis != {"NL_ASSERTION"})


def reward_difference(replayed: Replayed, simulation: Mapping[str, Any]) -> str:
  """Why our reward differs from the recorded one: the components that disagree."""
  ours = replayed.breakdown.get("rewards", {})
  theirs = (simulation.get("reward_info") or {}).get("reward_breakdown") or {}
  differing = [f"{kind}: ours {ours.get(kind)}, recorded {theirs.get(kind)}"
               for kind in sorted(set(ours) | set(theirs)) if ours.get(kind) != theirs.get(kind)]
  return "; ".join(differing) or "components agree; the product differs"


def replay_results(env: Any, path: str | pathlib.Path, out: str | pathlib.Path) -> dict[str, Any]:
  """Replays every simulation of a results file; writes OUT/results.jsonl (one line each) and
  OUT/summary.json (outputs matched, rewards equal, each mismatch with its reason)."""
  tasks, simulations = load_results(path)
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  rows, reward_mismatches, output_mismatches = [], [], []
  matched = total = equal = scored = 0
  for i, simulation in enumerate(simulations):
    where = f"{path} simulations[{i}]"
    task = tasks.get(simulation["task_id"])
    if task is None:
      raise ConfigError(f"{where}: task '{simulation['task_id']}' is not among the file's tasks")
    replayed = replay_simulation(env, task, simulation, where)
    rows.append(replayed.row())
    matched += replayed.outputs_matched
    total += replayed.outputs_total
    output_mismatches += [{"task_id": replayed.task_id, "trial": replayed.trial, **m}
                          for m in replayed.mismatches]
    if replayed.scored:
      scored += 1
      equal += replayed.reward_equal
      if not replayed.reward_equal:
        reward_mismatches.append({"task_id": replayed.task_id, "trial": replayed.trial,
                                  "reward": replayed.reward,
                                  "recorded_reward": replayed.recorded_reward,
                                  "reason": reward_difference(replayed, simulation)})
  summary = {
      "results_file": str(path), "domain": env.domain.name, "simulations": len(simulations),
      "outputs_matched": matched, "outputs_total": total,
      "outputs_matched_rate": matched / total if total else 1.0,
      "rewards_compared": scored, "rewards_equal": equal,
      "rewards_equal_rate": equal / scored if scored else 1.0,
      "left_out": len(simulations) - scored,
      "mean_reward": sum(r["reward"] for r in rows) / len(rows) if rows else 0.0,
      "mean_recorded_reward": (sum(r["recorded_reward"] for r in rows) / len(rows)
                               if rows else 0.0),
      "reward_mismatches": reward_mismatches, "output_mismatches": output_mismatches}
  with open(out / "results.jsonl", "w", encoding="utf-8") as f:
    for row in rows:
      f.write(json.dumps(row, ensure_ascii=False) + "\n")
  (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
  return summary
