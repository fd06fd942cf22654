"""Verification, the same for offline and LLM tasks: which candidates are kept, and why not.

In order, a task is dropped when: it is not a valid τ² task (`malformed`); its gold calls raise on
a fresh database (`gold_raises`); replaying its gold calls and saying its information does not
score 1.0 under the τ² scorer (`gold_not_solved`); the empty trajectory scores above 0
(`noop_succeeds`); its gold action sequence equals a kept task's (`duplicate_actions`); or its
request is nearly the same words as a kept task's with the same tools (`duplicate_intent`).
The database itself must pass schema validation and referential integrity before any of this.
"""

from __future__ import annotations

import collections
import json
import re
from typing import Any, Iterable, Mapping

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.data import parse_task
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.toolkit import Domain, replay

FILTERS = ("malformed", "gold_raises", "gold_not_solved", "noop_succeeds", "duplicate_actions",
           "duplicate_intent")
INTENT_SIMILARITY = 0.95  # token Jaccard of two requests above which they count as one intent


def _words(text: str) -> frozenset[str]:
  return frozenset(re.findall(r"[a-z0-9.@-]+", text.lower()))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
  return len(a & b) / max(1, len(a | b))


def check(domain: Domain, db: Mapping[str, Any], raw: Mapping[str, Any]) -> str | None:
  """Why one task fails verification on its own (None when it passes)."""
  try:
    task = parse_task(raw, f"task '{raw.get('id')}'")
  except ConfigError:
    return "malformed"
  if task.criteria is None or not task.criteria.actions or not task.ticket:
    return "malformed"
  gold = [(a.name, a.arguments) for a in task.criteria.actions]
  initial = Database(dict(db))  # never written: replays and scoring work on copies
  if replay(domain.bind(initial.copy()), gold):
    return "gold_raises"
  solved, _ = scoring.score(domain, task, initial, gold, ["\n".join(task.criteria.communicate_info)],
                            True)
  if solved != 1.0:
    return "gold_not_solved"
  noop, _ = scoring.score(domain, task, initial, [], [], True)
  if noop != 0.0:
    return "noop_succeeds"
  return None


def select(domain: Domain, db: Mapping[str, Any],
           candidates: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
  """(kept tasks in order, how many each filter dropped)."""
  dropped = collections.Counter({name: 0 for name in FILTERS})
  kept, sequences = [], set()
  intents: dict[tuple[str, ...], list[frozenset[str]]] = collections.defaultdict(list)
  for raw in candidates:
    reason = check(domain, db, raw)
    if reason is None:
      actions = raw["evaluation_criteria"]["actions"]
      sequence = json.dumps([(a["name"], a["arguments"]) for a in actions], sort_keys=True)
      names = tuple(a["name"] for a in actions)
      words = _words(raw["ticket"])
      if sequence in sequences:
        reason = "duplicate_actions"
      elif any(_jaccard(words, other) >= INTENT_SIMILARITY for other in intents[names]):
        reason = "duplicate_intent"
      else:
        sequences.add(sequence)
        intents[names].append(words)
    if reason:
      dropped[reason] += 1
    else:
      kept.append(raw)
  return kept, dict(dropped)
