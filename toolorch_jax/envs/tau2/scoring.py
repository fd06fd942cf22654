"""τ²'s outcome reward for one episode, a pure function of the task and what the agent did.

- An episode that did not end by the agent's choice (`done` or a transfer) scores 0 (premature
  termination: out of turns or context, a turn without a tool call, a policy error).
- DB: the agent's recorded calls are replayed on a fresh copy of the task's initial database and
  the gold actions on another; the two content hashes must be equal. With a user database
  (dual control), the user's calls and the gold actions the user requests are replayed the same
  way on the user's side, and its hashes must be equal too. A task with neither gold
  actions nor env assertions passes, as in τ².
- ENV_ASSERTION: every assertion holds on the agent's end state.
- ACTION: every gold action matches some call of the agent (`Action.matches`).
- COMMUNICATE: every `communicate_info` string is in some assistant text (case and commas ignored).

All checks are computed and reported; the reward is the product over the task's `reward_basis`.
Unlike τ², whose solo agent's stop message loses its text, the text of the `done` turn counts.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from toolorch_jax.envs.tau2.data import Criteria, EnvCall, Tau2Task
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.toolkit import Domain, replay
from toolorch_jax.tools.base import ToolError

Call = tuple[str, Mapping[str, Any]]


def _assertion(domain: Domain, db: Database, assertion: EnvCall) -> dict[str, Any]:
  check = {"func_name": assertion.func_name, "arguments": dict(assertion.arguments), "met": False,
           "error": None}
  functions = domain.user_assertions if assertion.env_type == "user" else domain.assertions
  try:
    value = functions[assertion.func_name](db, assertion.arguments)
    check["met"] = value == assertion.assert_value
  except (ToolError, KeyError) as err:  # e.g. the task it asks about was never created
    check["error"] = f"{type(err).__name__}: {err}"
  return check


def _gold_calls(criteria: Criteria, requestor: str) -> list[Call]:
  return [(a.name, a.arguments) for a in criteria.actions or () if a.requestor == requestor]


def _environment(domain: Domain, criteria: Criteria, initial: Database, calls: Sequence[Call],
                 user_initial: Database | None, user_calls: Sequence[Call]) -> dict[str, Any]:
  if criteria.actions is None and criteria.env_assertions is None:
    return {"db_match": True, "gold_errors": [], "env_assertions": []}
  predicted, gold = initial.copy(), initial.copy()
  replay(domain.bind(predicted), calls)
  gold_errors = replay(domain.bind(gold), _gold_calls(criteria, "assistant"))
  match = predicted.hash() == gold.hash()
  user_predicted = None
  if user_initial is not None:
    user_predicted, user_gold = user_initial.copy(), user_initial.copy()
    replay(domain.bind_user(user_predicted), user_calls)
    gold_errors += replay(domain.bind_user(user_gold), _gold_calls(criteria, "user"))
    match = match and user_predicted.hash() == user_gold.hash()
  assertions = [_assertion(domain, user_predicted if a.env_type == "user" else predicted, a)
                for a in criteria.env_assertions or ()]
  return {"db_match": match, "gold_errors": gold_errors, "env_assertions": assertions}


def _said(info: str, texts: Sequence[str]) -> bool:
  return any(info.lower() in text.lower().replace(",", "") for text in texts)


def score(domain: Domain, task: Tau2Task, initial: Database, calls: Sequence[Call],
          texts: Sequence[str], ended: bool, *, user_initial: Database | None = None,
          user_calls: Sequence[Call] = ()) -> tuple[float, dict[str, Any]]:
  """(reward, breakdown). `initial` is the task's start state (before any agent call), `calls` the
  agent's domain-tool calls in order (failed ones included), `texts` its assistant texts;
  `user_initial` and `user_calls` the same on the user's side (dual control)."""
  if not ended:
    return 0.0, {"premature": True}
  criteria = task.criteria
  if criteria is None:
    return 1.0, {"premature": False, "note": "no evaluation criteria"}
  breakdown: dict[str, Any] = {"premature": False, "reward_basis": list(criteria.reward_basis)}
  breakdown.update(_environment(domain, criteria, initial, calls, user_initial, user_calls))
  breakdown["actions"] = [{"action_id": a.action_id, "name": a.name,
                           "matched": any(a.matches(name, args) for name, args
                                          in (calls if a.requestor == "assistant" else user_calls))}
                          for a in criteria.actions or ()]
  breakdown["communicate"] = [{"info": info, "found": _said(info, texts)}
                              for info in criteria.communicate_info]
  passed = {"DB": breakdown["db_match"],
            "ENV_ASSERTION": all(c["met"] for c in breakdown["env_assertions"]),
            "ACTION": all(c["matched"] for c in breakdown["actions"]),
            "COMMUNICATE": all(c["found"] for c in breakdown["communicate"])}
  breakdown["rewards"] = {kind: float(passed[kind]) for kind in criteria.reward_basis}
  return math.prod(breakdown["rewards"].values()), breakdown
