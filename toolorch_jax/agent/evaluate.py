"""Evaluation: play each task once with a policy and report accuracy, cost, latency and tool mix."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Sequence

from toolorch_jax.agent.trajectory import Trajectory


def summarize(trajectories: Sequence[Trajectory]) -> dict:
  """`success_rate` counts outcomes of 1; `tool_mix` is each tool's share of all calls."""
  n = len(trajectories)
  calls = collections.Counter()
  for t in trajectories:
    calls.update(t.tool_counts)
  total_calls = sum(calls.values())
  faults = collections.Counter()
  for t in trajectories:
    faults.update(t.faults)
  mean = lambda values: sum(values) / n if n else 0.0
  return {
      "n_tasks": n,
      "success_rate": mean([float(t.outcome >= 1.0) for t in trajectories]),
      "mean_reward": mean([t.outcome for t in trajectories]),
      "mean_cost_usd": mean([t.cost_usd for t in trajectories]),
      "mean_latency_s": mean([t.latency_s for t in trajectories]),
      "mean_turns": mean([len(t.turns) for t in trajectories]),
      "tool_mix": {name: count / total_calls for name, count in sorted(calls.items())},
      "finish": dict(collections.Counter(t.finish for t in trajectories)),
      "faults": dict(faults),
  }


def result_row(t: Trajectory) -> dict:
  return {"task_id": t.task_id, "reward": t.outcome, "cost_usd": t.cost_usd, "latency_s": t.latency_s,
          "tool_calls": [{"name": c.name, "arguments": c.arguments, "error": c.error} for c in t.calls],
          "tool_counts": t.tool_counts, "finish": t.finish, "turns": len(t.turns),
          "episode_id": t.episode_id}


def write_results(out_dir: str | Path, trajectories: Sequence[Trajectory]) -> dict:
  """Writes results.jsonl, trajectories.jsonl and summary.json; returns the summary."""
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  with (out / "results.jsonl").open("w", encoding="utf-8") as f:
    for t in trajectories:
      f.write(json.dumps(result_row(t), ensure_ascii=False) + "\n")
  with (out / "trajectories.jsonl").open("w", encoding="utf-8") as f:
    for t in trajectories:
      f.write(t.to_json() + "\n")
  summary = summarize(trajectories)
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  return summary
