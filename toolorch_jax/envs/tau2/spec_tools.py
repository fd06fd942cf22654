"""Declarative domain tools: a domain directory's `tools.json` run by one deterministic interpreter.

Synthesised domains (data_synth/) ship their tools as data, not code, so nothing generated runs in
the trainer's process, and the same spec serves generation, verification, training and evaluation.
A spec names the tables of `db.json` (key, typed fields, references) and the tools; each tool runs
in a fixed order:

  load    rows by key:               {"as": "member", "table": "members", "key": "args.member_id"}
  require preconditions:             {"if": "member.status == 'active'", "error": "..."}
  search  rows by filter (a read):   {"table": "books", "where": "contains(row.title, args.q)"}
  create  a row, its id by rule:     {"as": "loan", "table": "loans", "values": {...}}
  update  loaded or created rows:    [{"row": "book", "set": {"copies": "book.copies - 1"}}]
  returns an expression (default: the created row, the search hits, or the first loaded row)

Values are expressions of `expr.py`. The clock is frozen (`clock` in the spec, stated in the
policy): `now` and `today` never read the machine's time. A new row's id is the table's prefix and
the next free number (`L0007` after `L0006`), never random, so gold and replayed databases hash
the same. Every write is checked against the table's fields (type, enum, reference) before it is
kept; a failed call changes nothing.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import expr
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.toolkit import Domain, DomainTool
from toolorch_jax.tools.base import ToolError

SPEC_FILE = "tools.json"
ASSERT_FIELD = "assert_field"  # the env assertion every spec domain has
_NAME = {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}
_EXPR = {"type": "string", "minLength": 1}
FIELD_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool}
SPEC_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["domain", "clock", "tables", "tools"],
    "additionalProperties": False,
    "properties": {
        "domain": _NAME,
        "clock": {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$"},
        "tables": {"type": "object", "minProperties": 1, "additionalProperties": {
            "type": "object", "required": ["key", "id_prefix", "fields"],
            "additionalProperties": False,
            "properties": {
                "key": _NAME,
                "id_prefix": {"type": "string", "pattern": "^[A-Z]{1,4}$"},
                "fields": {"type": "object", "minProperties": 1, "additionalProperties": {
                    "type": "object", "required": ["type"], "additionalProperties": False,
                    "properties": {
                        "type": {"enum": sorted(FIELD_TYPES)},
                        "enum": {"type": "array", "minItems": 1},
                        "ref": _NAME,
                        "nullable": {"type": "boolean"},
                        "description": {"type": "string"}}}}}}},
        "tools": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "description", "parameters"],
            "additionalProperties": False,
            "properties": {
                "name": _NAME,
                "description": {"type": "string", "minLength": 1},
                "parameters": {"type": "object", "additionalProperties": {
                    "type": "object", "required": ["type", "description"],
                    "additionalProperties": False,
                    "properties": {"type": {"enum": sorted(FIELD_TYPES)},
                                   "description": {"type": "string"},
                                   "enum": {"type": "array", "minItems": 1},
                                   "optional": {"type": "boolean"}}}},
                "load": {"type": "array", "items": {
                    "type": "object", "required": ["as", "table", "key"],
                    "additionalProperties": False,
                    "properties": {"as": _NAME, "table": _NAME, "key": _EXPR}}},
                "require": {"type": "array", "items": {
                    "type": "object", "required": ["if", "error"], "additionalProperties": False,
                    "properties": {"if": _EXPR, "error": {"type": "string"}}}},
                "search": {"type": "object", "required": ["table", "where"],
                           "additionalProperties": False,
                           "properties": {"table": _NAME, "where": _EXPR}},
                "create": {"type": "object", "required": ["as", "table", "values"],
                           "additionalProperties": False,
                           "properties": {"as": _NAME, "table": _NAME, "values": {
                               "type": "object", "additionalProperties": _EXPR}}},
                "update": {"type": "array", "items": {
                    "type": "object", "required": ["row", "set"], "additionalProperties": False,
                    "properties": {"row": _NAME, "set": {
                        "type": "object", "minProperties": 1, "additionalProperties": _EXPR}}}},
                "returns": _EXPR,
                "ends_episode": {"type": "boolean"}}}},
    },
}


def row_problems(spec: Mapping[str, Any], db: Mapping[str, Any], table: str,
                  row_id: str, row: Any) -> list[str]:
  """What is wrong with one row: its key, unknown or missing fields, types, enums, references."""
  where = f"{table}['{row_id}']"
  info = spec["tables"][table]
  if not isinstance(row, Mapping):
    return [f"{where}: expected an object, got {type(row).__name__}"]
  problems = []
  if row.get(info["key"]) != row_id:
    problems.append(f"{where}.{info['key']}: {row.get(info['key'])!r} is not the row's id")
  problems += [f"{where}.{name}: not a field of table '{table}'" for name in row
               if name not in info["fields"]]
  for name, field in info["fields"].items():
    if name not in row:
      problems.append(f"{where}.{name}: missing")
      continue
    value = row[name]
    if value is None:
      if not field.get("nullable"):
        problems.append(f"{where}.{name}: null, and the field is not nullable")
      continue
    kind = FIELD_TYPES[field["type"]]
    if not isinstance(value, kind) or (isinstance(value, bool) and field["type"] != "boolean"):
      problems.append(f"{where}.{name}: expected {field['type']}, got {type(value).__name__}")
    elif "enum" in field and value not in field["enum"]:
      problems.append(f"{where}.{name}: {value!r} is not one of {field['enum']}")
    elif "ref" in field and value not in db.get(field["ref"], {}):
      problems.append(f"{where}.{name}: '{value}' is not an id of table '{field['ref']}'")
  return problems


def db_problems(spec: Mapping[str, Any], db: Mapping[str, Any]) -> list[str]:
  """Schema validation and referential integrity of a whole database, one line per problem."""
  problems = [f"db: missing table '{t}'" for t in spec["tables"] if not isinstance(db.get(t), dict)]
  for table in spec["tables"]:
    for row_id, row in (db.get(table) or {}).items():
      problems += row_problems(spec, db, table, row_id, row)
  return problems


def spec_problems(spec: Any) -> list[str]:
  """Everything wrong with a spec: the JSON schema, then what a schema cannot say (expressions
  parse, tables and rows exist, names are bound before use)."""
  errors = sorted(jsonschema.Draft202012Validator(SPEC_SCHEMA).iter_errors(spec),
                  key=lambda e: list(e.absolute_path))
  if errors:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
  problems, tables = [], spec["tables"]
  for name, table in tables.items():
    if table["key"] not in table["fields"]:
      problems.append(f"tables/{name}: key '{table['key']}' is not a field")
    problems += [f"tables/{name}/fields/{f}: ref '{field['ref']}' is not a table"
                 for f, field in table["fields"].items() if field.get("ref", name) not in tables]
  seen = set()
  for i, tool in enumerate(spec["tools"]):
    where = f"tools/{i} ({tool['name']})"
    if tool["name"] in seen:
      problems.append(f"{where}: duplicate tool name")
    seen.add(tool["name"])
    bound = {"args", "now", "today"}

    def check(text: str, field: str, scope: set[str]) -> None:
      try:
        unbound = expr.names(expr.parse(text)) - scope
      except expr.ExprError as err:
        problems.append(f"{where}/{field}: {err}")
        return
      if unbound:
        problems.append(f"{where}/{field}: {text!r} reads {sorted(unbound)}, which are not bound")

    for j, load in enumerate(tool.get("load", [])):
      check(load["key"], f"load/{j}/key", bound)
      if load["table"] not in tables:
        problems.append(f"{where}/load/{j}: unknown table '{load['table']}'")
      bound.add(load["as"])
    for j, rule in enumerate(tool.get("require", [])):
      check(rule["if"], f"require/{j}/if", bound)
    if "search" in tool:
      if tool["search"]["table"] not in tables:
        problems.append(f"{where}/search: unknown table '{tool['search']['table']}'")
      check(tool["search"]["where"], "search/where", bound | {"row"})
      bound.add("hits")
    if "create" in tool:
      create = tool["create"]
      if create["table"] not in tables:
        problems.append(f"{where}/create: unknown table '{create['table']}'")
      else:
        key = tables[create["table"]]["key"]
        problems += [f"{where}/create/values/{f}: not a field of '{create['table']}'"
                     for f in create["values"] if f not in tables[create["table"]]["fields"]
                     or f == key]
      for field, text in create["values"].items():
        check(text, f"create/values/{field}", bound)
      bound.add(create["as"])
    for j, update in enumerate(tool.get("update", [])):
      if update["row"] not in bound - {"args", "now", "today", "hits"}:
        problems.append(f"{where}/update/{j}: row '{update['row']}' is not loaded or created")
      for field, text in update["set"].items():
        check(text, f"update/{j}/set/{field}", bound)
    if "returns" in tool:
      check(tool["returns"], "returns", bound)
    elif not (tool.get("load") or "search" in tool or "create" in tool):
      problems.append(f"{where}: returns nothing (no returns, load, search or create)")
  return problems


def _next_id(table: Mapping[str, Any], prefix: str) -> str:
  """The id rule: prefix + (largest number in use with that prefix + 1), four digits at least."""
  numbers = [int(m.group(1)) for key in table
             if (m := re.fullmatch(re.escape(prefix) + r"(\d+)", key))]
  return f"{prefix}{max(numbers, default=0) + 1:04d}"


def clock_scope(spec: Mapping[str, Any]) -> dict[str, str]:
  return {"now": spec["clock"], "today": spec["clock"][:10]}


class SpecTool(DomainTool):
  """A tool whose work is its spec; subclasses made by `build_domain` set `spec` and `tool`."""

  spec: Mapping[str, Any] = {}
  tool: Mapping[str, Any] = {}

  def _load(self, scope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows = {}
    for load in self.tool.get("load", []):
      key = self._value(load["key"], scope)
      row = self.db.data[load["table"]].get(key) if isinstance(key, str) else None
      if row is None:
        raise ToolError(f"{load['table']} '{key}' not found")
      scope[load["as"]] = row
      rows[load["as"]] = row
    return rows

  def _value(self, text: str, scope: Mapping[str, Any]) -> Any:
    try:
      return expr.evaluate(text, scope)
    except expr.ExprError as err:
      raise ToolError(f"{self.name}: {err}") from None

  def apply(self, arguments: dict[str, Any]) -> Any:
    """Runs the spec on a scratch copy of the touched tables, then commits it; any ToolError
    leaves the database as it was."""
    scope: dict[str, Any] = {"args": {name: arguments.get(name) for name in self.tool["parameters"]},
                             **clock_scope(self.spec)}
    rows = self._load(scope)
    for rule in self.tool.get("require", []):
      if not self._value(rule["if"], scope):
        raise ToolError(rule["error"])
    if "search" in self.tool:
      search = self.tool["search"]
      scope["hits"] = [row for _, row in sorted(self.db.data[search["table"]].items())
                       if self._value(search["where"], {**scope, "row": row})]
    tables_of = {load["as"]: load["table"] for load in self.tool.get("load", [])}
    touched: list[str] = []  # names of the rows created or updated, in order
    if "create" in self.tool:
      create = self.tool["create"]
      table, info = create["table"], self.spec["tables"][create["table"]]
      row = {info["key"]: _next_id(self.db.data[table], info["id_prefix"]),
             **{f: self._value(t, scope) for f, t in create["values"].items()}}
      row = {field: row.get(field) for field in info["fields"]}
      scope[create["as"]] = rows[create["as"]] = row
      tables_of[create["as"]] = table
      touched.append(create["as"])
    for update in self.tool.get("update", []):
      name = update["row"]
      scope[name] = rows[name] = {
          **rows[name], **{f: self._value(t, scope) for f, t in update["set"].items()}}
      touched += [] if name in touched else [name]
    writes = [(tables_of[n], rows[n][self.spec["tables"][tables_of[n]]["key"]], rows[n])
              for n in touched]
    self._commit(writes)
    if "returns" in self.tool:
      return self._value(self.tool["returns"], scope)
    if "create" in self.tool:
      return scope[self.tool["create"]["as"]]
    if "search" in self.tool:
      return scope["hits"]
    return next(iter(rows.values()))

  def _commit(self, writes: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Checks every written row (types, enums, references) against the database as it will be,
    then writes them all, or none."""
    after = {table: dict(self.db.data[table]) for table, _, _ in writes}
    for table, row_id, row in writes:
      after[table][row_id] = row
    view = {**self.db.data, **after}
    for table, row_id, row in writes:
      problems = row_problems(self.spec, view, table, row_id, row)
      if problems:
        raise ToolError(f"{self.name}: the write is invalid: {problems[0]}")
    for table, row_id, row in writes:
      self.db.data[table][row_id] = copy.deepcopy(row)


def _parameters(tool: Mapping[str, Any]) -> dict[str, Any]:
  properties = {}
  for name, param in tool["parameters"].items():
    properties[name] = {"type": param["type"], "description": param["description"]}
    if "enum" in param:
      properties[name]["enum"] = list(param["enum"])
  return {"type": "object", "properties": properties,
          "required": [n for n, p in tool["parameters"].items() if not p.get("optional")],
          "additionalProperties": False}


def build_domain(spec: Mapping[str, Any]) -> Domain:
  """The τ² `Domain` a spec describes; ConfigError listing the spec's problems."""
  problems = spec_problems(spec)
  if problems:
    raise ConfigError(f"tool spec of domain '{spec.get('domain', '?')}': "
                      + "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""))
  tools = tuple(
      type(f"SpecTool_{tool['name']}", (SpecTool,), {
          "name": tool["name"], "description": tool["description"], "spec": spec, "tool": tool,
          "parameters": _parameters(tool), "ends_episode": tool.get("ends_episode", False)})
      for tool in spec["tools"])

  def assert_field(db: Database, arguments: Mapping[str, Any]) -> bool:
    row = db.data[arguments["table"]].get(arguments["key"])
    if row is None:
      raise ToolError(f"{arguments['table']} '{arguments['key']}' not found")
    return row.get(arguments["field"]) == arguments["expected"]

  return Domain(spec["domain"], tools, {ASSERT_FIELD: assert_field},
                tables=tuple(spec["tables"]), solo_policy="policy.md")


def is_domain_dir(name: str) -> bool:
  """`settings.domain` is a path (it has a separator: `runs/synth/bank`, `./bank`), not a name."""
  return "/" in name or os.sep in name


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, mtime: float) -> Domain:
  try:
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
  except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
    raise ConfigError(f"{path}: cannot read the tool spec: {err}") from None
  return build_domain(spec)


def load_spec_domain(folder: str | Path) -> Domain:
  """The domain of a directory with a `tools.json` spec (e.g. written by `toolorch synth`)."""
  path = Path(folder) / SPEC_FILE
  if not path.is_file():
    raise ConfigError(f"env.settings.domain: {folder} has no {SPEC_FILE} (a τ² domain directory"
                      " needs db.json, policy.md, tasks.json, split_tasks.json and tools.json)")
  return _load_cached(str(path.resolve()), path.stat().st_mtime)
