"""LLM mode: an OpenAI-compatible endpoint writes the schema, the entries, the tools and the tasks.

Every request goes through the project's expert client (`LLMExpert`: retries, timeouts, cost).
Every answer must be JSON that passes a check; a failed check is sent back with the error for a
repair (`repairs` per stage), and an answer still wrong after the repairs is dropped and counted.
Entries are checked one by one (fields, types, references: an inconsistent entry is dropped),
tools by the spec's JSON schema and then a smoke test on the database (a tool whose example call
fails is repaired or dropped), tasks by running their gold calls. Requests run `concurrency` at a
time. Nothing is written before the domain is complete (the pipeline writes it whole).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from tqdm import tqdm

from data_synth.fake_db import reference_order
from data_synth.stages import Ledger, digest, write_atomic
from data_synth.tasks import INTENT_SIZES
from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.spec_tools import build_domain, row_problems, spec_problems
from toolorch_jax.envs.tau2.toolkit import replay
from toolorch_jax.tools.base import ToolContext
from toolorch_jax.tools.catalog import ModelCatalog, ModelSpec
from toolorch_jax.tools.http_retry import RetryPolicy
from toolorch_jax.tools.llm_expert import LLMExpert, LLMExpertSettings
from toolorch_jax.tools.pricing import Price

Check = Callable[[Any], list[str]]
CHUNK_ROWS = 5  # rows per table shown to the LLM with one intent
SYSTEM = ("You build a synthetic customer-service domain for training tool-using agents."
          " Stage: {stage}. Answer with one JSON value only, no prose.")


def _json(text: str) -> Any:
  """The JSON in an answer, allowing a ```json fence around it."""
  fenced = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", text, re.S)
  return json.loads(fenced.group(1) if fenced else text)


@dataclasses.dataclass
class LLMSource:
  expert: LLMExpert
  fingerprint_: tuple[str, str]
  concurrency: int = 8
  repairs: int = 1  # retries with the error before an answer is dropped
  answers_dir: Path | None = None  # where answers are kept for reuse (the pipeline sets it)

  @classmethod
  def from_args(cls, base_url: str | None, model: str, api_key_env: str = "",
                concurrency: int = 8, price_in: float = 0.0, price_out: float = 0.0,
                retry: RetryPolicy | None = None) -> "LLMSource":
    if not base_url:
      raise ConfigError("--base-url: LLM mode needs an OpenAI-compatible endpoint (or --offline)")
    if concurrency < 1:
      raise ConfigError(f"--concurrency: need at least 1, got {concurrency}")
    catalog = ModelCatalog.build({"writer": ModelSpec(
        model=model, base_url=base_url, api_key_env=api_key_env,
        price=Price(per_mtok_input=price_in, per_mtok_output=price_out))}, {})
    expert = LLMExpert("synth_writer", LLMExpertSettings(
        models=["writer"], temperature=0.0, retry=retry or RetryPolicy()), models=catalog)
    return cls(expert, (base_url, model), concurrency)

  def fingerprint(self) -> list[str]:
    return list(self.fingerprint_)

  async def ask(self, domain: str, stage: str, prompt: str, check: Check, ledger: Ledger,
                limit: asyncio.Semaphore) -> Any | None:
    """A checked JSON answer, after up to `repairs` retries with the error; None when dropped."""
    messages = [{"role": "system", "content": SYSTEM.format(stage=stage.split(":")[-1])},
                {"role": "user", "content": prompt}]
    for attempt in range(self.repairs + 1):
      text = await self._complete(domain, stage, messages, ledger, limit)
      if text is None:
        ledger.add(domain, stage, dropped=1)
        return None
      try:
        value = _json(text)
        problems = check(value)
      except json.JSONDecodeError as err:
        value, problems = None, [f"not valid JSON: {err}"]
      if not problems:
        return value
      if attempt < self.repairs:
        ledger.add(domain, stage, repairs=1)
        messages += [{"role": "assistant", "content": text},
                     {"role": "user", "content": "That answer was rejected: " + "; ".join(problems[:5])
                      + ". Answer again with the corrected JSON only."}]
    ledger.add(domain, stage, dropped=1)
    return None

  async def _complete(self, domain: str, stage: str, messages: list[dict[str, str]],
                      ledger: Ledger, limit: asyncio.Semaphore) -> str | None:
    """The endpoint's answer to `messages`, stored under `answers_dir` by a digest of the model
    and the messages: a rerun after an interruption reuses answers already paid for."""
    path = self.answers_dir / f"{digest(self.fingerprint_, messages)}.txt" if self.answers_dir else None
    if path is not None and path.is_file():
      ledger.add(domain, stage, reused=1)
      return path.read_text(encoding="utf-8")
    async with limit:
      result = await self.expert.call({"messages": messages}, ToolContext(episode_id=stage))
    meta = result.metadata
    ledger.add(domain, stage, calls=1, cost_usd=result.cost_usd,
               input_tokens=meta.get("input_tokens", 0), output_tokens=meta.get("output_tokens", 0))
    if not result.ok:
      return None
    if path is not None:
      write_atomic(path, result.text)
    return result.text

  # -- environment: schema, entries, tools ---------------------------------------------------
  def environment(self, description: Mapping[str, Any], ledger: Ledger) -> dict[str, Any]:
    return asyncio.run(self._environment(description, ledger))

  async def _environment(self, description: Mapping[str, Any], ledger: Ledger) -> dict[str, Any]:
    domain, limit = description["domain"], asyncio.Semaphore(self.concurrency)
    base = {"domain": domain, "clock": description["clock"]}
    # The tables are checked as a spec's tables: a spec needs a tool, so a trivial one stands in.
    probe = {"name": "probe", "description": "x", "parameters": {}, "returns": "now"}

    def check_tables(tables: Any) -> list[str]:
      return spec_problems({**base, "tables": tables, "tools": [probe]})

    tables = await self.ask(domain, "environment:schema", (
        f"Domain: {description['title']}. Rules: {' '.join(description['rules'])}\n"
        "Give the database schema as an object: table name -> {key, id_prefix (1-4 capitals),"
        " fields: field -> {type: string|integer|number|boolean, optional enum, optional ref}}."
        f" Subjects to cover: {', '.join(description['tables'])}."), check_tables,
        ledger, limit)
    if tables is None:
      raise ConfigError(f"domain '{domain}': no valid schema from the LLM; nothing written")
    spec = {**base, "tables": tables, "tools": [probe]}
    db: dict[str, dict[str, Any]] = {name: {} for name in tables}
    for name in reference_order(tables):
      rows = await self.ask(domain, "environment:entries", (
          f"Write 5 to 20 rows of table '{name}' as a JSON list of objects with exactly the"
          f" fields {json.dumps(tables[name]['fields'])}; ids {tables[name]['id_prefix']}0001,"
          f" ...; references must be ids of: "
          + json.dumps({t: sorted(db[t]) for t in db if db[t]})),
          lambda v: [] if isinstance(v, list) else ["expected a JSON list of rows"], ledger, limit)
      for row in rows or []:
        row_id = row.get(tables[name]["key"]) if isinstance(row, dict) else None
        view = {**db, name: {**db[name], str(row_id): row}}
        if not isinstance(row_id, str) or row_problems(spec, view, name, row_id, row):
          ledger.add(domain, "environment:entries", dropped=1)  # inconsistent with the schema or references
          continue
        db[name][row_id] = row

    def check_tools(tools: Any) -> list[str]:
      if not isinstance(tools, list):
        return ["expected a JSON list of tool specs"]
      bare = [_without_example(t) if isinstance(t, dict) else t for t in tools]
      return spec_problems({**base, "tables": tables, "tools": bare})

    tools = await self.ask(domain, "environment:tools", (
        "Propose the frequently used tools as a JSON list of declarative tool specs (name,"
        " description, parameters, load, require, search, create, update, returns), each with an"
        " 'example' object of arguments that works on this database: "
        + json.dumps(db)[:20000]), check_tools, ledger, limit)
    if not tools:
      raise ConfigError(f"domain '{domain}': no valid tool specs from the LLM; nothing written")
    kept = [_without_example(t) for t in tools if self._smoke(base, tables, db, t, domain, ledger)]
    if not kept:
      raise ConfigError(f"domain '{domain}': every tool failed its smoke test; nothing written")
    return {"db": db, "spec": {**base, "tables": tables, "tools": kept}}

  @staticmethod
  def _smoke(base: Mapping[str, Any], tables: Any, db: Mapping[str, Any], tool: Mapping[str, Any],
             domain: str, ledger: Ledger) -> bool:
    """The tool's example call runs on a copy of the database; a failing tool is dropped."""
    built = build_domain({**base, "tables": tables, "tools": [_without_example(tool)]})
    errors = replay(built.bind(Database(db).copy()),
                    [(tool["name"], tool.get("example", {}))])
    if errors:
      ledger.add(domain, "environment:tools", dropped=1)
    return not errors

  # -- tasks ---------------------------------------------------------------------------------
  def candidates(self, description: Mapping[str, Any], environment: Mapping[str, Any],
                 count: int, seed: int, ledger: Ledger, progress: bool) -> list[dict[str, Any]]:
    return asyncio.run(self._candidates(description, environment, count, seed, ledger, progress))

  async def _candidates(self, description: Mapping[str, Any], environment: Mapping[str, Any],
                        count: int, seed: int, ledger: Ledger,
                        progress: bool) -> list[dict[str, Any]]:
    domain_name, limit = description["domain"], asyncio.Semaphore(self.concurrency)
    domain = build_domain(environment["spec"])
    names = sorted(t["name"] for t in environment["spec"]["tools"])
    rng = random.Random(f"{domain_name}:{seed}:intents")
    intents = [tuple(rng.sample(names, min(len(names), rng.choice(INTENT_SIZES))))
               for _ in range(count)]

    def check_task(value: Any) -> list[str]:
      if not (isinstance(value, dict) and isinstance(value.get("ticket"), str)
              and isinstance(value.get("actions"), list) and value["actions"]):
        return ["expected {ticket: str, actions: [{name, arguments}], communicate_info: [str]}"]
      actions, said = value["actions"], value.get("communicate_info", [])
      if not all(isinstance(a, dict) and isinstance(a.get("name"), str)
                 and isinstance(a.get("arguments", {}), dict) for a in actions):
        return ["every action must be {name: str, arguments: object}"]
      if not (isinstance(said, list) and all(isinstance(v, (str, int, float)) for v in said)):
        return ["communicate_info must be a list of strings or numbers"]
      calls = [(a["name"], a.get("arguments", {})) for a in actions]
      return replay(domain.bind(Database(environment["db"]).copy()), calls)

    bar = tqdm(total=len(intents), desc=f"{domain_name}: tasks", disable=not progress)

    chunks = [_chunk(environment["db"], rng) for _ in intents]

    async def one(i: int, intent: tuple[str, ...]) -> dict[str, Any] | None:
      answer = await self.ask(domain_name, "tasks", (
          f"Request {i}. Using the tools {list(intent)} on rows of this database chunk, write one"
          " customer request as {ticket, actions: [{name, arguments}], communicate_info: [values"
          " the agent must say]}: " + json.dumps(chunks[i])), check_task, ledger, limit)
      bar.update()
      if answer is None:
        return None
      return _record(f"{domain_name}_{i:04d}", description, intent, answer)

    made = await asyncio.gather(*(one(i, intent) for i, intent in enumerate(intents)))
    bar.close()
    return [task for task in made if task is not None]


def _chunk(db: Mapping[str, Any], rng: random.Random, rows: int = CHUNK_ROWS) -> dict[str, Any]:
  """A few random rows per table: the part of the database one task is written about."""
  return {table: {key: entries[key] for key in sorted(rng.sample(sorted(entries),
                                                                 min(rows, len(entries))))}
          for table, entries in db.items()}


def _without_example(tool: Mapping[str, Any]) -> dict[str, Any]:
  """A proposed tool as the spec keeps it: its `example` call is only for the smoke test."""
  return {k: v for k, v in tool.items() if k != "example"}


def _record(task_id: str, description: Mapping[str, Any], intent: tuple[str, ...],
            answer: Mapping[str, Any]) -> dict[str, Any]:
  told = [str(v).replace(",", "") for v in answer.get("communicate_info") or []]
  return {
      "id": task_id,
      "description": {"purpose": f"{description['domain']}: {' -> '.join(intent)}",
                      "relevant_policies": None, "notes": "evolve depth 0"},
      "user_scenario": {"persona": None, "instructions": {
          "domain": description["domain"], "reason_for_call": answer["ticket"],
          "known_info": None, "unknown_info": None,
          "task_instructions": "Ask the agent for everything in your reason for calling."}},
      "ticket": answer["ticket"],
      "initial_state": None,
      "evaluation_criteria": {
          "actions": [{"action_id": f"{task_id}_{i}", "requestor": "assistant", "name": a["name"],
                       "arguments": a.get("arguments", {})} for i, a in enumerate(answer["actions"])],
          "env_assertions": [], "communicate_info": told, "nl_assertions": None,
          "reward_basis": ["DB", "COMMUNICATE"]},
  }

