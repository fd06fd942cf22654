"""Offline tasks: intents from tool subsets, tool chains that serve them, and evolution.

An intent is an ordered subset of the domain's tools (its size sets the difficulty). A task
composes one call per tool on a working copy of the database: arguments are sampled by the
template's rules (from rows that satisfy a filter, from a field, a choice, a range, fake data),
reusing an argument of the same name from earlier in the chain more often than not, so a chain
tends to be about one member, one account; a call that the domain refuses is sampled again. Each
call that reads contributes what the agent must tell the user. Evolution then adds, one step at a
time, a tool (a longer chain), an entity (the same request for another row) or a constraint (an
end-state assertion on a row the chain changed).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Mapping

from faker import Faker

from data_synth.fake_db import fake_value
from toolorch_jax.envs.tau2 import expr
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.spec_tools import ASSERT_FIELD, clock_scope
from toolorch_jax.envs.tau2.toolkit import Domain
from toolorch_jax.tools.base import ToolError

EVOLVE_OPS = ("add_tool", "add_entity", "add_constraint")
DEPTHS = (0, 1, 1, 2, 2, 3)  # evolution steps per task, drawn uniformly
INTENT_SIZES = (1, 1, 2, 2, 3)
REUSE = 0.65  # chance to reuse a same-named argument from earlier in the chain
TRIES = 8  # samples of a call before its tool is given up for this chain


@dataclasses.dataclass
class Step:
  name: str
  arguments: dict[str, Any]
  ask: str
  tell: str | None  # what the agent must say after this call, if anything


@dataclasses.dataclass
class Draft:
  """A task being built: its intent, calls, constraints and how it was evolved."""

  intent: tuple[str, ...]
  steps: list[Step]
  constraints: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  evolution: list[str] = dataclasses.field(default_factory=list)


def say(value: Any) -> str:
  """A value as the agent should say it (the τ² scorer ignores commas, so none are kept)."""
  return str(value).replace(",", "")


class Composer:
  """Builds drafts on one domain: its description, its spec `Domain` and base database."""

  def __init__(self, description: Mapping[str, Any], domain: Domain, db: Mapping[str, Any],
               seed: int):
    self.description, self.domain, self.base = description, domain, Database(dict(db))
    self.templates = {tool["name"]: tool for tool in description["tools"]}
    self.faker = Faker("en_US")
    self.faker.seed_instance(seed)
    self.clock = clock_scope(description)

  def _argument(self, rule: Mapping[str, Any], args: dict[str, Any], db: Database,
                rng: random.Random) -> Any:
    if "from" in rule:
      rows = db.data[rule["from"]]
      ids = [key for key in sorted(rows) if "where" not in rule
             or expr.evaluate(rule["where"], {"row": rows[key], "args": args, **self.clock})]
      if not ids:
        raise ToolError(f"no row of {rule['from']} satisfies {rule.get('where')}")
      return rng.choice(ids)
    if "field" in rule:
      table, field = rule["field"].split(".")
      return db.data[table][rng.choice(sorted(db.data[table]))][field]
    return fake_value(rule, rng, self.faker)

  def _step(self, db: Database, name: str, earlier: list[Step], rng: random.Random,
            fresh: bool = False) -> Step | None:
    """One successful call of tool `name` on `db` (applied), or None after TRIES refusals."""
    template, tool = self.templates[name], self.domain.bind(db)[name]
    known = {k: v for step in earlier for k, v in step.arguments.items()}
    for _ in range(TRIES):
      args: dict[str, Any] = {}
      try:
        for param, rule in template["sample"].items():
          reuse = not fresh and param in known and rng.random() < REUSE
          args[param] = known[param] if reuse else self._argument(rule, args, db, rng)
        result = tool.apply(tool.validate(args))
      except ToolError:
        continue
      tell = template.get("tell")
      told = say(expr.evaluate(tell, {"result": result, "args": args})) if tell else None
      return Step(name, args, template["ask"].format(**args), told)
    return None

  def intent(self, rng: random.Random) -> tuple[str, ...]:
    size = min(rng.choice(INTENT_SIZES), len(self.templates))
    return tuple(rng.sample(sorted(self.templates), size))

  def compose(self, intent: tuple[str, ...], depth: int, rng: random.Random) -> Draft | None:
    """A draft serving `intent`, evolved `depth` times; None when a tool cannot be served."""
    db = self.base.copy()
    draft = Draft(intent, [])
    for name in intent:
      step = self._step(db, name, draft.steps, rng)
      if step is None:
        return None
      draft.steps.append(step)
    for _ in range(depth):
      if not self._evolve(draft, db, rng):
        break
    draft.constraints = [_constraint(db, **c["arguments"]) for c in draft.constraints]
    return draft

  def _evolve(self, draft: Draft, db: Database, rng: random.Random) -> bool:
    """One evolution step on `draft` (and its working `db`); False when none applies."""
    for op in rng.sample(EVOLVE_OPS, len(EVOLVE_OPS)):
      if op == "add_constraint":
        constraint = self._constraint(draft, db, rng)
        if constraint:
          draft.constraints.append(constraint)
          draft.evolution.append(op)
          return True
        continue
      if op == "add_tool":
        unused = sorted(set(self.templates) - {s.name for s in draft.steps}) or sorted(self.templates)
        step = self._step(db, rng.choice(unused), draft.steps, rng)
      else:  # add_entity: the same request about another row
        step = self._step(db, rng.choice(draft.steps).name, draft.steps, rng, fresh=True)
        if step:
          step.ask = f"do the same for another case: {step.ask}"
      if step:
        draft.steps.append(step)
        draft.evolution.append(op)
        return True
    return False

  def _constraint(self, draft: Draft, db: Database, rng: random.Random) -> dict[str, Any] | None:
    """An assertion that a field the chain changed ends with its new value."""
    changed = []
    for table, rows in sorted(db.data.items()):
      before = self.base.data[table]
      for key, row in sorted(rows.items()):
        old = before.get(key, {})
        changed += [(table, key, field) for field in sorted(row) if old.get(field) != row[field]
                    and not any(c["arguments"]["key"] == key and c["arguments"]["field"] == field
                                for c in draft.constraints)]
    if not changed:
      return None
    table, key, field = rng.choice(changed)
    return _constraint(db, table, key, field)


def _constraint(db: Database, table: str, key: str, field: str,
                expected: Any = None) -> dict[str, Any]:
  """The assertion that `field` of row `key` ends as it is in `db`: made again once the chain is
  complete, since a step added later may change the field again."""
  value = db.data[table][key][field]
  return {"env_type": "assistant", "func_name": ASSERT_FIELD, "assert_value": True,
          "arguments": {"table": table, "key": key, "field": field, "expected": value},
          "message": f"Make sure that the {field.replace('_', ' ')} of {key} ends up as"
                     f" {say(value)}."}

