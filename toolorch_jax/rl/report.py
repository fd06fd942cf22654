"""Held-out evaluation per preference profile, baselines, and the run report (JSON, Markdown, PNG).

Each profile's held-out episodes are scored with the run's composite reward, normalising the
preference features over that profile's episodes (one group), as a population-level analogue of
the per-task groups used in training.
"""

from __future__ import annotations

import asyncio
import json
import resource
from pathlib import Path

import numpy as np

from toolorch_jax.agent.evaluate import summarize
from toolorch_jax.agent.loop import run_groups
from toolorch_jax.agent.policy import EnginePolicy
from toolorch_jax.rewards import compute_rewards
from toolorch_jax.rl.config import RunConfig


def held_out_tasks(env, config: RunConfig) -> list:
  tasks = list(env.tasks(config.report.split))
  return tasks[:config.report.tasks] if config.report.tasks else tasks


def _profile_summary(trajectories, rewards, models) -> dict:
  """The evaluation summary with the composite reward, and the tool mix over the experts only."""
  summary = summarize(trajectories)
  expert_share = sum(summary["tool_mix"].get(m, 0.0) for m in models) or 1.0
  return {
      "mean_reward": float(np.mean(rewards)),
      "accuracy": summary["success_rate"],
      "mean_cost_usd": summary["mean_cost_usd"],
      "mean_latency_s": summary["mean_latency_s"],
      "tool_mix": {m: summary["tool_mix"].get(m, 0.0) / expert_share for m in models},
      "n": summary["n_tasks"],
  }


def evaluate_profiles(trainer, config: RunConfig) -> dict[str, dict]:
  """Episodes on held-out tasks under each preference profile (seeded sampling at
  `report.temperature`, the policy as trained; 0 for its greedy choices)."""
  from toolorch_jax.serving import SamplingParams

  env = trainer.env
  tasks = held_out_tasks(env, config)
  policy = EnginePolicy(trainer.client, SamplingParams(temperature=config.report.temperature),
                        seed=config.train.seed + 1)
  models = list(getattr(env, "models", []))
  summaries = {}
  for index, profile in enumerate(env.settings.profiles):
    profiled = env.with_profile(tasks, profile)
    trajectories = asyncio.run(run_groups(env, policy, profiled, config.report.samples,
                                          trainer.tokenizer, trainer.loop_config, first_group_id=0))
    for t in trajectories:
      t.group_id = index  # one normalisation group per profile
    rewards, _ = compute_rewards(trajectories, config.rewards)
    summaries[profile.name] = _profile_summary(trajectories, rewards, models)
  return summaries


def _targets(before: dict, after: dict, baselines: dict) -> dict[str, bool]:
  names = list(after)
  targets = {"reward_improved": float(np.mean([after[p]["mean_reward"] for p in names]))
                                > float(np.mean([before[p]["mean_reward"] for p in names]))}
  accuracy_first = next((p for p in names if "accuracy" in p), None)
  cost_first = next((p for p in names if "cost" in p), None)
  if accuracy_first and cost_first:
    targets["cost_first_spends_40pct_less"] = (
        after[cost_first]["mean_cost_usd"] <= 0.6 * after[accuracy_first]["mean_cost_usd"])
  line = baselines.get("random_at_matched_cost", {})
  for p in names:
    if p in line:
      targets[f"above_random_mixing/{p}"] = after[p]["accuracy"] > line[p]["accuracy"]
  return targets


def _markdown(report: dict) -> str:
  lines = ["# toolorch_jax local run", "",
           f"Wall time {report['wall_seconds']:.0f} s, peak memory {report['peak_memory_mib']:.0f} MiB.", "",
           "| stage | profile | reward | accuracy | cost / task (USD) | latency (s) | tool mix | n |",
           "|---|---|---:|---:|---:|---:|---|---:|"]
  for stage in ("before", "after"):
    for profile, s in report[stage].items():
      mix = ", ".join(f"{k} {v:.0%}" for k, v in s["tool_mix"].items())
      lines.append(f"| {stage} | {profile} | {s['mean_reward']:.3f} | {s['accuracy']:.3f} |"
                   f" {s['mean_cost_usd']:.6f} | {s['mean_latency_s']:.2f} | {mix} | {s['n']} |")
  lines += ["", "| baseline | accuracy | cost / task (USD) |", "|---|---:|---:|"]
  for name, b in report["baselines"].items():
    if name != "random_at_matched_cost":
      lines.append(f"| {name} | {b['accuracy']:.3f} | {b['mean_cost_usd']:.6f} |")
  for profile, b in report["baselines"].get("random_at_matched_cost", {}).items():
    lines.append(f"| random at the cost of '{profile}' | {b['accuracy']:.3f} | {b['mean_cost_usd']:.6f} |")
  lines += ["", "| target | met |", "|---|---|"]
  lines += [f"| {name} | {'yes' if met else 'no'} |" for name, met in report["targets"].items()]
  return "\n".join(lines) + "\n"


def _plots(workdir: Path, report: dict) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  steps, rewards = [], []
  metrics_file = workdir / "metrics.jsonl"
  if metrics_file.is_file():
    for line in metrics_file.read_text().splitlines():
      record = json.loads(line)
      if record.get("reward/mean") is not None:
        steps.append(record["step"])
        rewards.append(record["reward/mean"])
  figure, axis = plt.subplots(figsize=(6, 4))
  axis.plot(steps, rewards, marker="o")
  axis.set(xlabel="RL step", ylabel="mean composite reward (training rollouts)", title="Reward")
  figure.tight_layout()
  figure.savefig(workdir / "reward_curve.png", dpi=110)
  plt.close(figure)

  figure, axis = plt.subplots(figsize=(8, 4.5))
  base = report["baselines"]
  if "always_weak" in base:
    weak, strong = base["always_weak"], base["always_strong"]
    axis.plot([weak["mean_cost_usd"], strong["mean_cost_usd"]], [weak["accuracy"], strong["accuracy"]],
              "k--", label="random mixing of weak and strong")
    for name in ("always_weak", "always_strong", "oracle"):
      axis.scatter(base[name]["mean_cost_usd"], base[name]["accuracy"], marker="s", label=name)
  for stage, marker in (("before", "x"), ("after", "o")):
    for profile, s in report[stage].items():
      axis.scatter(s["mean_cost_usd"], s["accuracy"], marker=marker, s=60, label=f"{stage}: {profile}")
  axis.set(xlabel="mean cost per task (USD)", ylabel="accuracy (held out)", title="Accuracy vs cost")
  axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside, not on, the points
  figure.tight_layout()
  figure.savefig(workdir / "accuracy_vs_cost.png", dpi=110)
  plt.close(figure)


def write_report(workdir: Path, config: RunConfig, env, before: dict, after: dict,
                 wall_seconds: float) -> dict:
  tasks = held_out_tasks(env, config)
  baselines = env.baselines(tasks, {p: s["mean_cost_usd"] for p, s in after.items()}) \
      if hasattr(env, "baselines") else {}
  report = {"before": before, "after": after, "baselines": baselines, "wall_seconds": wall_seconds,
            "peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
  report["targets"] = _targets(before, after, baselines)
  (workdir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
  markdown = _markdown(report)
  (workdir / "report.md").write_text(markdown)
  _plots(workdir, report)
  print(markdown)
  return report
