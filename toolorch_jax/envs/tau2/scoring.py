"""τ²'s outcome reward for one episode, a pure function of the task and what was done.

- An episode that did not end by choice (the agent's `done` or a transfer, or the user's stop)
  scores 0 (premature termination: out of turns or context, too many errors, a policy error).
- DB: the recorded calls are replayed on fresh copies of the task's initial databases (the agent's
  calls on the agent's, the user's calls on the user's) and the gold actions, each on the side of
  its requestor, on other copies; both content hashes must be equal. A task with neither gold
  actions nor env assertions passes, as in τ²; an empty action list means "change nothing".
- ENV_ASSERTION: every assertion holds on the end state of its side (agent or user).
- ACTION: every gold action matches some call, the agent's or the user's (`Action.matches`).
- COMMUNICATE: every `communicate_info` string is in some assistant text (case and commas ignored).
- NL_ASSERTION: needs an LLM judge; without one the breakdown says so and the rest is scored.

All checks are computed and reported; the reward is the product over the task's `reward_basis`.
Unlike τ², whose solo agent's stop message loses its text, the text of the `done` turn counts.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from toolorch_jax.envs.tau2.data import Criteria, EnvCall, Tau2Task
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.toolkit import Domain, Sides

Call = tuple[str, Mapping[str, Any]]
NO_JUDGE = "no judge endpoint given: NL assertions are not scored, the reward is the rest"


def _assertion(sides: Sides, assertion: EnvCall) -> dict[str, Any]:
  check = {"env_type": assertion.env_type, "func_name": assertion.func_name,
           "arguments": dict(assertion.arguments), "met": False, "error": None}
  try:
    check["met"] = sides.run(assertion.env_type, assertion.func_name,
                             assertion.arguments) == assertion.assert_value
  except Exception as err:  # pylint: disable=broad-exception-caught  # τ²: an unmet assertion
    check["error"] = f"{type(err).__name__}: {err}"
  return check


def _environment(domain: Domain, criteria: Criteria, initial: Database, calls: Sequence[Call],
                 user_initial: Database | None, user_calls: Sequence[Call],
                 order: Sequence[str] | None, solo: bool) -> dict[str, Any]:
  if criteria.actions is None and criteria.env_assertions is None:
    return {"db_match": True, "gold_errors": [], "env_assertions": []}
  predicted = Sides(domain, initial.copy(), user_initial and user_initial.copy(), solo)
  queues = {"assistant": iter(calls), "user": iter(user_calls)}
  for side in order if order is not None else ["assistant"] * len(calls) + ["user"] * len(user_calls):
    name, arguments = next(queues[side])
    predicted.call(side, name, arguments)
  gold = Sides(domain, initial.copy(), user_initial and user_initial.copy(), solo)
  gold_errors = []
  for action in criteria.actions or ():  # as τ²: the gold actions without syncs between them
    outcome = gold.call(action.requestor, action.name, action.arguments, sync=False)
    if outcome.error:
      gold_errors.append(f"{action.name}: {outcome.text.removeprefix('Error: ')}")
  match = {side: (db is None or db.hash() == gold.dbs[side].hash())
           for side, db in predicted.dbs.items()}
  assertions = [_assertion(predicted, a) for a in criteria.env_assertions or ()]
  return {"db_match": all(match.values()), "user_db_match": match["user"],
          "gold_errors": gold_errors, "env_assertions": assertions}


def _said(info: str, texts: Sequence[str]) -> bool:
  return any(info.lower() in text.lower().replace(",", "") for text in texts)


def score(domain: Domain, task: Tau2Task, initial: Database, calls: Sequence[Call],
          texts: Sequence[str], ended: bool, *, user_initial: Database | None = None,
          user_calls: Sequence[Call] = (), order: Sequence[str] | None = None,
          solo: bool = False) -> tuple[float, dict[str, Any]]:
  """(reward, breakdown). `initial` is the task's start state (before any agent call), `calls` the
  agent's domain-tool calls in order (failed ones included), `texts` its assistant texts;
  `user_initial` and `user_calls` the same for the user's side where the user has tools. `order`
  gives the requestor ("assistant" or "user") of each call in the order they ran, where the two
  sides' calls interleave (default: the agent's, then the user's); where the sides are synced
  (telecom) the end state depends on it. `solo`: the agent may call the user's tools."""
  if not ended:
    return 0.0, {"premature": True}
  criteria = task.criteria
  if criteria is None:
    return 1.0, {"premature": False, "note": "no evaluation criteria"}
  breakdown: dict[str, Any] = {"premature": False, "reward_basis": list(criteria.reward_basis)}
  breakdown.update(_environment(domain, criteria, initial, calls, user_initial, user_calls, order,
                                solo))
  every_call = list(calls) + list(user_calls)
  breakdown["actions"] = [{"action_id": a.action_id, "name": a.name, "requestor": a.requestor,
                           "matched": any(a.matches(name, args) for name, args in every_call)}
                          for a in criteria.actions or ()]
  breakdown["communicate"] = [{"info": info, "found": _said(info, texts)}
                              for info in criteria.communicate_info]
  passed = {"DB": breakdown["db_match"],
            "ENV_ASSERTION": all(c["met"] for c in breakdown["env_assertions"]),
            "ACTION": all(c["matched"] for c in breakdown["actions"]),
            "COMMUNICATE": all(c["found"] for c in breakdown["communicate"])}
  breakdown["rewards"] = {kind: float(passed[kind]) for kind in criteria.reward_basis
                          if kind in passed}
  if "NL_ASSERTION" in criteria.reward_basis:
    breakdown["nl_assertions"] = {"assertions": list(criteria.nl_assertions), "note": NO_JUDGE}
  return math.prod(breakdown["rewards"].values()), breakdown
