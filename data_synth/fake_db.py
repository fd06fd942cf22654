"""The offline database: rows of fake data from a description's field rules, seeded.

Faker (seeded per domain) writes names, emails, addresses and phrases; choices, ranges and dates
come from the same seeded `random.Random`, so a seed gives the same bytes on every machine.
Tables are filled in an order where every referenced table comes first.
"""

from __future__ import annotations

import datetime
import random
from typing import Any, Mapping

from faker import Faker

from toolorch_jax.config import ConfigError


def reference_order(tables: Mapping[str, Any]) -> list[str]:
  done: list[str] = []
  pending = list(tables)
  while pending:
    ready = [t for t in pending
             if all(f.get("ref") in (None, t, *done) for f in tables[t]["fields"].values())]
    if not ready:
      raise ConfigError(f"tables: circular references among {pending}")
    done += ready
    pending = [t for t in pending if t not in ready]
  return done


def random_date(rng: random.Random, bounds: list[str]) -> str:
  start, end = (datetime.date.fromisoformat(b) for b in bounds)
  return (start + datetime.timedelta(days=rng.randint(0, (end - start).days))).isoformat()


def fake_value(rule: Mapping[str, Any], rng: random.Random, faker: Faker) -> Any:
  """One value by a field or argument rule (choices, range, date or a Faker provider)."""
  if "choices" in rule:
    return rng.choice(rule["choices"])
  if "range" in rule:
    low, high = rule["range"]
    if "decimals" in rule or isinstance(low, float):
      return round(rng.uniform(low, high), rule.get("decimals", 2))
    return rng.randint(low, high)
  if "date" in rule:
    return random_date(rng, rule["date"])
  if "fake" in rule:
    provider = getattr(faker, rule["fake"], None)
    if provider is None:
      raise ConfigError(f"fake: '{rule['fake']}' is not a Faker provider")
    return provider(rule["pattern"]) if "pattern" in rule else provider()
  raise ConfigError(f"no generation rule in {dict(rule)}")


def build_db(description: Mapping[str, Any], seed: int) -> dict[str, dict[str, Any]]:
  rng = random.Random(f"{description['domain']}:{seed}:db")
  faker = Faker("en_US")
  faker.seed_instance(rng.randrange(2**32))
  tables = description["tables"]
  db: dict[str, dict[str, Any]] = {}
  for name in reference_order(tables):
    table, rows = tables[name], {}
    for n in range(1, table["rows"] + 1):
      row_id = f"{table['id_prefix']}{n:04d}"
      row = {}
      for field, rule in table["fields"].items():
        if field == table["key"]:
          row[field] = row_id
        elif "ref" in rule:
          row[field] = rng.choice(sorted(db[rule["ref"]]))
        else:
          row[field] = fake_value(rule, rng, faker)
      rows[row_id] = row
    db[name] = rows
  return db
