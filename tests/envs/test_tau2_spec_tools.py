"""Declarative domain tools: the safe expression language and the interpreter's promises (id
rule, preconditions, checked writes that change nothing when refused, a frozen clock)."""

import copy

import pytest

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import expr
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.spec_tools import build_domain, db_problems, spec_problems
from toolorch_jax.tools.base import ToolError

SPEC = {
    "domain": "shop", "clock": "2025-05-01T10:00:00",
    "tables": {
        "items": {"key": "item_id", "id_prefix": "I", "fields": {
            "item_id": {"type": "string"}, "stock": {"type": "integer"}}},
        "orders": {"key": "order_id", "id_prefix": "O", "fields": {
            "order_id": {"type": "string"}, "item_id": {"type": "string", "ref": "items"},
            "day": {"type": "string"}, "status": {"type": "string", "enum": ["new", "sent"]}}}},
    "tools": [
        {"name": "order", "description": "Order one item in stock.",
         "parameters": {"item_id": {"type": "string", "description": "item"}},
         "load": [{"as": "item", "table": "items", "key": "args.item_id"}],
         "require": [{"if": "item.stock > 0", "error": "out of stock"}],
         "create": {"as": "o", "table": "orders",
                    "values": {"item_id": "args.item_id", "day": "add_days(today, 2)",
                               "status": "'new'"}},
         "update": [{"row": "item", "set": {"stock": "item.stock - 1"}}]},
        {"name": "set_status", "description": "Set an order's status.",
         "parameters": {"order_id": {"type": "string", "description": "order"},
                        "status": {"type": "string", "description": "status"}},
         "load": [{"as": "o", "table": "orders", "key": "args.order_id"}],
         "update": [{"row": "o", "set": {"status": "args.status"}}]}],
}
DB = {"items": {"I0001": {"item_id": "I0001", "stock": 1}},
      "orders": {"O0007": {"order_id": "O0007", "item_id": "I0001", "day": "2025-04-01",
                           "status": "sent"}}}


def test_expressions_compute_and_refuse_what_is_not_in_the_language():
  scope = {"a": {"b": 3}, "today": "2025-01-30"}
  assert expr.evaluate("a.b * 2 + 1 >= 7 and not false", scope) is True
  assert expr.evaluate("add_days(today, 3)", scope) == "2025-02-02"
  assert expr.evaluate("round(10 / 3, 2)", scope) == 3.33
  for text in ("__import__('os')", "a.b.__class__", "open('x')", "a[0]", "lambda: 1"):
    with pytest.raises(expr.ExprError):
      expr.evaluate(text, scope)


def test_the_interpreter_keeps_its_promises():
  domain = build_domain(SPEC)
  db = Database(copy.deepcopy(DB))
  tools = domain.bind(db)
  made = tools["order"].apply({"item_id": "I0001"})
  assert made == {"order_id": "O0008", "item_id": "I0001", "day": "2025-05-03", "status": "new"}
  assert db.data["items"]["I0001"]["stock"] == 0 and db_problems(SPEC, db.data) == []
  before = db.hash()
  with pytest.raises(ToolError, match="out of stock"):
    tools["order"].apply({"item_id": "I0001"})
  with pytest.raises(ToolError, match="not one of"):  # a write outside the enum is refused
    tools["set_status"].apply({"order_id": "O0008", "status": "lost"})
  with pytest.raises(ToolError, match="orders 'O0404' not found"):
    tools["set_status"].apply({"order_id": "O0404", "status": "sent"})
  assert db.hash() == before


def test_spec_problems_name_the_place():
  bad = copy.deepcopy(SPEC)
  bad["tools"][0]["update"][0]["set"]["stock"] = "item.stock -"
  bad["tools"][1]["returns"] = "nobody.name"
  problems = spec_problems(bad)
  assert any(p.startswith("tools/0 (order)/update/0/set/stock") for p in problems)
  assert any("reads ['nobody']" in p for p in problems)
  assert spec_problems({"domain": "x"})[0].startswith("(top): 'clock' is a required property")
  with pytest.raises(ConfigError, match="tool spec of domain 'shop'"):
    build_domain(bad)


def test_db_problems_find_broken_references_and_types():
  db = copy.deepcopy(DB)
  db["orders"]["O0007"]["item_id"] = "I0404"
  db["items"]["I0001"]["stock"] = "many"
  assert db_problems(SPEC, db) == [
      "items['I0001'].stock: expected integer, got str",
      "orders['O0007'].item_id: 'I0404' is not an id of table 'items'"]


def test_a_hand_written_domain_is_still_taken_by_module_attr():
  from toolorch_jax.envs.tau2.env import Settings, Tau2Environment

  env = Tau2Environment(Settings(domain="toolorch_jax.envs.tau2.mock_tools:MOCK"))
  assert env.domain.name == "mock" and len(env.tasks()) == 7
  with pytest.raises(ConfigError, match="not a τ² Domain"):
    Tau2Environment(Settings(domain="toolorch_jax.envs.tau2.mock_tools:STATUSES"))
