"""A domain description: tables with fake-data rules, and tool templates; YAML or JSON.

A tool template is a declarative tool of `toolorch_jax.envs.tau2.spec_tools` plus what the
generator needs: how to sample its arguments (`sample`), how a user asks for it (`ask`, a format
string over the arguments) and what the agent must then tell the user (`tell`, an expression over
the call's `result` and `args`). `spec()` strips those and gives the tool spec the domain ships.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import spec_tools

DOMAINS_DIR = Path(__file__).parent / "domains"
SHIPPED = ("bank", "clinic", "library")
GENERATION_KEYS = ("sample", "ask", "tell")

_RULE = {"type": "object", "additionalProperties": False, "properties": {
    "from": {"type": "string"}, "where": {"type": "string"}, "field": {"type": "string"},
    "choices": {"type": "array", "minItems": 1}, "range": {"type": "array", "minItems": 2,
                                                           "maxItems": 2},
    "date": {"type": "array", "minItems": 2, "maxItems": 2}, "fake": {"type": "string"}}}
DESCRIPTION_SCHEMA = {
    "type": "object", "required": ["domain", "title", "clock", "rules", "tables", "tools"],
    "properties": {
        "domain": {"type": "string"}, "title": {"type": "string"}, "clock": {"type": "string"},
        "rules": {"type": "array", "items": {"type": "string"}},
        "tables": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["key", "id_prefix", "rows", "fields"],
            "properties": {"rows": {"type": "integer", "minimum": 1}}}},
        "tools": {"type": "array", "items": {
            "type": "object", "required": ["name", "sample", "ask"],
            "properties": {"sample": {"type": "object", "additionalProperties": _RULE},
                           "ask": {"type": "string"}, "tell": {"type": "string"}}}}},
}


def load_description(path: str | Path) -> dict[str, Any]:
  """A description file (YAML or JSON), checked: its own schema, then the tool spec it implies.
  In LLM mode the tables only name the subjects and `tools` may be empty: the LLM writes them."""
  path = Path(path)
  try:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
  except (OSError, yaml.YAMLError) as err:
    raise ConfigError(f"{path}: cannot read the domain description: {err}") from None
  errors = sorted(jsonschema.Draft202012Validator(DESCRIPTION_SCHEMA).iter_errors(raw),
                  key=lambda e: list(e.absolute_path))
  if errors:
    where = "/".join(map(str, errors[0].absolute_path)) or "(top)"
    raise ConfigError(f"{path}: {where}: {errors[0].message}")
  problems = spec_tools.spec_problems(spec(raw)) if raw["tools"] else []
  for tool in raw["tools"]:
    missing = set(tool.get("parameters", {})) - set(tool["sample"])
    if missing:
      problems.append(f"tools/{tool['name']}/sample: no rule for {sorted(missing)}")
  if problems:
    raise ConfigError(f"{path}: " + "; ".join(problems))
  return raw


def shipped(name: str) -> dict[str, Any]:
  return load_description(DOMAINS_DIR / f"{name}.yaml")


def _field_spec(field: Mapping[str, Any]) -> dict[str, Any]:
  out = {"type": field["type"]}
  if field.get("enum") is True:
    out["enum"] = sorted(set(field["choices"]), key=str)
  if "ref" in field:
    out["ref"] = field["ref"]
  if field.get("nullable"):
    out["nullable"] = True
  return out


def spec(description: Mapping[str, Any]) -> dict[str, Any]:
  """The declarative tool spec (`tools.json`) of a description."""
  return {
      "domain": description["domain"], "clock": description["clock"],
      "tables": {name: {"key": table["key"], "id_prefix": table["id_prefix"],
                        "fields": {f: _field_spec(v) for f, v in table["fields"].items()}}
                 for name, table in description["tables"].items()},
      "tools": [{k: v for k, v in tool.items() if k not in GENERATION_KEYS}
                for tool in description["tools"]],
  }


def policy(description: Mapping[str, Any]) -> str:
  """policy.md: who the agent is, the frozen clock, the rules, the tools by name."""
  lines = [f"# {description['title'].capitalize()}: agent policy", "",
           f"You are a customer service agent of {description['title']}.",
           f"The current time is {description['clock']} (frozen: every date is relative to it).",
           "Use the tools to act; never invent ids or values. Refuse requests the rules forbid.",
           "Tell the user the values they ask for, exactly as the tools return them.", "",
           "## Rules", ""]
  lines += [f"- {rule}" for rule in description["rules"]]
  lines += ["", "## Tools", ""]
  lines += [f"- `{tool['name']}`: {tool['description']}" for tool in description["tools"]]
  return "\n".join(lines) + "\n"


def digest(description: Mapping[str, Any]) -> str:
  """Canonical JSON text of a description: what a stage cache keys on."""
  return json.dumps(description, sort_keys=True, ensure_ascii=False)
