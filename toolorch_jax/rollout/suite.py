"""A benchmark suite: several environments evaluated by one policy, reported as one table.

A suite YAML (`configs/suites/NAME.yaml`) lists benchmarks, each an environment preset (or YAML)
with overrides, a split, a task limit and a number of trials, and the paper column it counts
toward (`HLE`, `FRAMES`, `τ²-Bench`, ...). Each benchmark is written to its own folder like
`toolorch eval` does; `table.md` and `table.json` hold one row per benchmark (accuracy, or pass^1
with trials, mean cost and latency) and the paper's table: our mean per column beside the
reference rows the suite quotes (ToolOrchestra's Orchestrator-8B and GPT-5).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Callable, Sequence

from omegaconf import MISSING

from toolorch_jax.config import ConfigError, config_dir, load_config
from toolorch_jax.rollout.summary import write_results
from toolorch_jax.rollout.trajectory import Trajectory


@dataclasses.dataclass
class BenchmarkSpec:
  name: str = MISSING  # the row's label
  env: str = MISSING  # an environment preset in configs/envs/, or a YAML file
  overrides: list[str] = dataclasses.field(default_factory=list)  # key=value on the env config
  split: str | None = None  # None: the environment's default
  limit: int = 0  # the first N tasks; 0: all
  trials: int = 1  # episodes per task; the row's accuracy is then pass^1
  column: str = ""  # the paper's column this benchmark counts toward ("" = none)
  policy: str = ""  # "" = the suite's


@dataclasses.dataclass
class ReferenceRow:
  """A published row: accuracy (%) per column, and mean cost and latency where reported."""

  name: str = MISSING
  scores: dict[str, float] = dataclasses.field(default_factory=dict)
  cost_usd: float | None = None
  latency_s: float | None = None
  source: str = ""


@dataclasses.dataclass
class SuiteConfig:
  policy: str = ""  # the policy of every benchmark (the command line's --policy wins)
  benchmarks: list[BenchmarkSpec] = dataclasses.field(default_factory=list)
  columns: list[str] = dataclasses.field(default_factory=list)  # the paper table's columns
  reference: list[ReferenceRow] = dataclasses.field(default_factory=list)

  def __post_init__(self):
    if not self.benchmarks:
      raise ConfigError("benchmarks: list at least one benchmark")
    names = [b.name for b in self.benchmarks]
    for i, bench in enumerate(self.benchmarks):
      if names.count(bench.name) > 1:
        raise ConfigError(f"benchmarks[{i}].name: '{bench.name}' is listed twice")
      if bench.trials < 1 or bench.limit < 0:
        raise ConfigError(f"benchmarks[{i}]: need trials >= 1 and limit >= 0")
      if bench.column and bench.column not in self.columns:
        raise ConfigError(f"benchmarks[{i}].column: '{bench.column}' is not one of columns"
                          f" {self.columns}")


def load_suite(name_or_path: str, overrides: Sequence[str] = ()) -> SuiteConfig:
  """A suite by name (configs/suites/NAME.yaml) or path."""
  preset = config_dir() / "suites" / f"{name_or_path}.yaml"
  return load_config(SuiteConfig, preset if preset.is_file() else name_or_path, overrides)


# (benchmark, policy) -> its trajectories: how the command line plays one benchmark.
Play = Callable[[BenchmarkSpec, str], list[Trajectory]]


def run_suite(suite: SuiteConfig, play: Play, out_dir: str | Path, policy: str = "") -> dict:
  """Plays every benchmark, writes each one's results and the tables; returns table.json's data."""
  out = Path(out_dir)
  rows = []
  for bench in suite.benchmarks:
    chosen = policy or bench.policy or suite.policy
    if not chosen:
      raise ConfigError(f"benchmark '{bench.name}': no policy (give --policy, or policy: in the"
                        " suite)")
    summary = write_results(out / _slug(bench.name), play(bench, chosen))
    accuracy = summary["pass_hat_k"].get("1", summary["success_rate"])
    rows.append({"benchmark": bench.name, "column": bench.column, "policy": chosen,
                 "tasks": summary["n_tasks"] // bench.trials, "trials": bench.trials,
                 "accuracy": 100.0 * accuracy, "mean_cost_usd": summary["mean_cost_usd"],
                 "mean_latency_s": summary["mean_latency_s"],
                 "mean_user_cost_usd": summary["mean_user_cost_usd"]})
  table = {"benchmarks": rows, "paper": _paper_rows(suite, rows)}
  out.mkdir(parents=True, exist_ok=True)
  (out / "table.json").write_text(json.dumps(table, indent=2, ensure_ascii=False) + "\n")
  (out / "table.md").write_text(render(table, suite.columns), encoding="utf-8")
  return table


def _slug(name: str) -> str:
  return re.sub(r"[^\w.-]+", "_", name).strip("_") or "benchmark"


def _mean(values: list[float]) -> float | None:
  return sum(values) / len(values) if values else None


def _paper_rows(suite: SuiteConfig, rows: list[dict]) -> list[dict]:
  """Ours (per column, the mean of its benchmarks' accuracies; cost and latency over all
  benchmarks that count toward a column), then the suite's reference rows."""
  counted = [row for row in rows if row["column"]]
  ours = {"name": "ours", "source": "this run",
          "scores": {c: _mean([r["accuracy"] for r in counted if r["column"] == c])
                     for c in suite.columns},
          "cost_usd": _mean([r["mean_cost_usd"] for r in counted]),
          "latency_s": _mean([r["mean_latency_s"] for r in counted])}
  return [ours, *({"name": r.name, "source": r.source, "scores": dict(r.scores),
                   "cost_usd": r.cost_usd, "latency_s": r.latency_s} for r in suite.reference)]


def _cell(value: float | None, digits: int) -> str:
  return "" if value is None else f"{value:.{digits}f}"


def render(table: dict, columns: Sequence[str]) -> str:
  lines = ["| benchmark | policy | tasks × trials | accuracy (pass^1) % | mean cost $ |"
           " mean latency s | mean user cost $ |", "|---|---|---|---:|---:|---:|---:|"]
  for r in table["benchmarks"]:
    lines.append(f"| {r['benchmark']} | {r['policy']} | {r['tasks']} × {r['trials']} |"
                 f" {r['accuracy']:.1f} | {r['mean_cost_usd']:.4f} | {r['mean_latency_s']:.2f} |"
                 f" {r['mean_user_cost_usd']:.4f} |")
  lines += ["", "| system | " + " | ".join(columns) + " | mean cost $ | mean latency s | source |",
            "|---|" + "---:|" * (len(columns) + 2) + "---|"]
  for r in table["paper"]:
    cells = [_cell(r["scores"].get(c), 1) for c in columns]
    lines.append(f"| {r['name']} | " + " | ".join(cells)
                 + f" | {_cell(r['cost_usd'], 4)} | {_cell(r['latency_s'], 2)} | {r['source']} |")
  return "\n".join(lines) + "\n"
