"""The stats table of a run, like the paper's ToolScale table: per domain tools, entries, tasks,
actions per task and evolve depth, then what each filter dropped, then what each stage spent."""

from __future__ import annotations

import json
from statistics import mean
from typing import Any, Mapping

from data_synth.records import evolve_depth


def domain_row(domain: str, environment: Mapping[str, Any], candidates: int,
               kept: list[Mapping[str, Any]], dropped: Mapping[str, int]) -> dict[str, Any]:
  actions = [len(t["evaluation_criteria"]["actions"]) for t in kept]
  depths = [evolve_depth(t) for t in kept]
  sequences = {json.dumps([(a["name"], a["arguments"]) for a in t["evaluation_criteria"]["actions"]],
                          sort_keys=True) for t in kept}
  return {
      "domain": domain,
      "tools": len(environment["spec"]["tools"]),
      "entries": sum(len(rows) for rows in environment["db"].values()),
      "candidates": candidates,
      "tasks": len(kept),
      "actions_per_task": round(mean(actions), 2) if actions else 0.0,
      "evolve_depth_mean": round(mean(depths), 2) if depths else 0.0,
      "evolve_depth_ge2": round(sum(d >= 2 for d in depths) / max(1, len(depths)), 3),
      "distinct_action_sequences": round(len(sequences) / max(1, len(kept)), 3),
      "dropped": dict(dropped),
  }


def build(rows: list[dict[str, Any]], usage: list[dict[str, Any]], **about: Any) -> dict[str, Any]:
  tasks = sum(r["tasks"] for r in rows)
  total = {"domain": "total", "tools": sum(r["tools"] for r in rows),
           "entries": sum(r["entries"] for r in rows),
           "candidates": sum(r["candidates"] for r in rows), "tasks": tasks,
           "actions_per_task": round(sum(r["actions_per_task"] * r["tasks"] for r in rows)
                                     / max(1, tasks), 2),
           "evolve_depth_mean": round(sum(r["evolve_depth_mean"] * r["tasks"] for r in rows)
                                      / max(1, tasks), 2),
           "evolve_depth_ge2": round(sum(r["evolve_depth_ge2"] * r["tasks"] for r in rows)
                                     / max(1, tasks), 3),
           "distinct_action_sequences": round(sum(r["distinct_action_sequences"] * r["tasks"]
                                                  for r in rows) / max(1, tasks), 3),
           "dropped": {}}
  for row in rows:
    for reason, n in row["dropped"].items():
      total["dropped"][reason] = total["dropped"].get(reason, 0) + n
  return {**about, "domains": rows, "total": total, "usage": usage}


_WHY = {
    "malformed": "not a valid τ² task",
    "gold_raises": "a gold call raised on a fresh database",
    "gold_not_solved": "gold calls + information did not score 1.0",
    "noop_succeeds": "the empty trajectory scored above 0",
    "duplicate_actions": "same gold action sequence as a kept task",
    "duplicate_intent": "request nearly the same words as a kept task",
    "surplus": "verified, beyond the tasks wanted",
}


def markdown(stats: Mapping[str, Any]) -> str:
  cols = ("domain", "tools", "entries", "candidates", "tasks", "actions_per_task",
          "evolve_depth_mean", "evolve_depth_ge2", "distinct_action_sequences")
  rows = [*stats["domains"], stats["total"]]
  lines = [f"# ToolScale synthesis ({stats['mode']}, seed {stats['seed']})", "",
           "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
  lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
  reasons = sorted({k for r in rows for k in r["dropped"]})
  lines += ["", "## Dropped by each filter", "",
            "| filter | why | " + " | ".join(r["domain"] for r in rows) + " |",
            "|---|---|" + "---|" * len(rows)]
  lines += [f"| {k} | {_WHY.get(k, 'no attempt of the policy solved it')} | "
            + " | ".join(str(r["dropped"].get(k, 0)) for r in rows) + " |" for k in reasons]
  ucols = ("domain", "stage", "calls", "input_tokens", "output_tokens", "cost_usd", "repairs",
           "dropped", "reused", "cached")
  lines += ["", "## Spent per stage", "", "| " + " | ".join(ucols) + " |", "|" + "---|" * len(ucols)]
  lines += ["| " + " | ".join(str(u[c]) for c in ucols) + " |" for u in stats["usage"]]
  return "\n".join(lines) + "\n"
