"""What a batch of trajectories amounts to: accuracy, cost, latency, tool use, endings, faults.

One summary serves `toolorch eval` (summary.json), the run report and the trainer's per-step
metrics, so the three always count the same way.
"""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path
from typing import Mapping, Sequence

from toolorch_jax.rollout.trajectory import Trajectory


def _shares(counts: collections.Counter) -> dict[str, float]:
  total = sum(counts.values())
  return {name: count / total for name, count in sorted(counts.items())}


def pass_hat_k(trials: Mapping[str, Sequence[bool]], k: int) -> float:
  """τ²'s pass^k: the chance that k trials of a task drawn at random all succeed, estimated per task
  from its n trials with c successes as C(c, k) / C(n, k), then averaged over tasks."""
  if not trials:
    return 0.0
  for task_id, results in trials.items():
    if not 1 <= k <= len(results):
      raise ValueError(f"pass^{k}: task '{task_id}' has {len(results)} trials; need k in"
                       f" 1..{len(results)}")
  return sum(math.comb(sum(results), k) / math.comb(len(results), k)
             for results in trials.values()) / len(trials)


def successes_by_task(trajectories: Sequence[Trajectory]) -> dict[str, list[bool]]:
  """Each task's trials (success = an outcome of 1, as τ² counts), in order."""
  trials: dict[str, list[bool]] = collections.defaultdict(list)
  for t in trajectories:
    trials[t.task_id].append(t.outcome >= 1.0)
  return dict(trials)


def summarize(trajectories: Sequence[Trajectory]) -> dict:
  """`success_rate` counts outcomes of 1; `tool_mix` is each tool's share of all calls,
  `calls_per_episode` their mean count, and `profile_tool_mix` the tool mix under each named
  preference (does the policy route differently per user preference?)."""
  n = len(trajectories)
  calls, faults = collections.Counter(), collections.Counter()
  per_profile: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for t in trajectories:
    calls.update(t.tool_counts)
    faults.update(t.faults)
    if t.preference and t.preference.get("name"):
      per_profile[t.preference["name"]].update(t.tool_counts)
  mean = lambda values: sum(values) / n if n else 0.0
  return {
      "n_tasks": n,
      "success_rate": mean([float(t.outcome >= 1.0) for t in trajectories]),
      "mean_reward": mean([t.outcome for t in trajectories]),
      "mean_cost_usd": mean([t.cost_usd for t in trajectories]),
      "mean_latency_s": mean([t.latency_s for t in trajectories]),
      "mean_turns": mean([len(t.turns) for t in trajectories]),
      "tool_mix": _shares(calls),
      "calls_per_episode": {name: count / n for name, count in sorted(calls.items())},
      "profile_tool_mix": {name: _shares(counts) for name, counts in sorted(per_profile.items())},
      "finish": dict(collections.Counter(str(t.finish) for t in trajectories)),
      "faults": dict(faults),
      "mean_user_cost_usd": mean([t.user_cost_usd for t in trajectories]),
      "pass_hat_k": _pass_hat_ks(trajectories),
  }


def _pass_hat_ks(trajectories: Sequence[Trajectory]) -> dict[str, float]:
  """pass^1 .. pass^n, n the fewest trials of any task."""
  trials = successes_by_task(trajectories)
  n = min((len(results) for results in trials.values()), default=0)
  return {str(k): pass_hat_k(trials, k) for k in range(1, n + 1)}


def result_row(t: Trajectory, trial: int = 0) -> dict:
  return {"task_id": t.task_id, "trial": trial, "reward": t.outcome, "cost_usd": t.cost_usd,
          "latency_s": t.latency_s, "user_cost_usd": t.user_cost_usd,
          "tool_calls": [{"name": c.name, "arguments": c.arguments, "error": c.error} for c in t.calls],
          "tool_counts": t.tool_counts, "finish": t.finish, "turns": len(t.turns),
          "episode_id": t.episode_id}


def write_results(out_dir: str | Path, trajectories: Sequence[Trajectory]) -> dict:
  """Writes results.jsonl, trajectories.jsonl and summary.json; returns the summary."""
  out = Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  seen: collections.Counter = collections.Counter()
  with (out / "results.jsonl").open("w", encoding="utf-8") as f:
    for t in trajectories:
      f.write(json.dumps(result_row(t, seen[t.task_id]), ensure_ascii=False) + "\n")
      seen[t.task_id] += 1
  with (out / "trajectories.jsonl").open("w", encoding="utf-8") as f:
    for t in trajectories:
      f.write(t.to_json() + "\n")
  summary = summarize(trajectories)
  (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  return summary
