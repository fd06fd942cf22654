"""Held-out evaluation (per preference profile), baselines, targets, and the run report (JSON,
Markdown, PNG).

Each profile's held-out episodes are scored twice. `utility` is the profile's fixed-scale score
(`Preference.utility`: accuracy minus cost and latency in the environment's units), the same for
before, after, every baseline and the oracle, so they compare like with like. `mean_reward` is the
run's composite reward, with group-normalised components normalised over that profile's episodes
(one group); it depends on the episodes beside each other and is kept as the training signal's
view. An environment without profiles is evaluated once, on its tasks as they are, under the name
`ALL_TASKS`.
"""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from toolorch_jax.data.task import Preference, Task
from toolorch_jax.distributed import allgather_lists, process_share
from toolorch_jax.envs.base import Ability, Environment
from toolorch_jax.rewards import compute_rewards
from toolorch_jax.rl.config import RunConfig
from toolorch_jax.rl.targets import check_targets
from toolorch_jax.rollout.engine_rollout import Rollout
from toolorch_jax.rollout.summary import summarize
from toolorch_jax.rollout.trajectory import EpisodeEnd

ALL_TASKS = "all tasks"


def held_out_tasks(env: Environment, config: RunConfig) -> list[Task]:
  tasks = list(env.tasks(config.report.split))
  return tasks[:config.report.tasks] if config.report.tasks else tasks


def _profiles(env: Environment) -> list[Preference]:
  return list(env.profiles()) if Ability.PROFILES in env.abilities() else []


def profile_names(env: Environment) -> list[str]:
  """The names the report evaluates under: the environment's profiles, or `ALL_TASKS`."""
  return [p.name for p in _profiles(env)] or [ALL_TASKS]


def _profile_summary(env: Environment, trajectories, rewards, preference: Preference | None) -> dict:
  """The evaluation summary with the composite reward, the fixed-scale utility under the profile,
  the tool mix over the environment's choices (its experts, say) when it names them, and the
  environment's breakdown of decisions when it has one."""
  summary = summarize(trajectories)
  mix, choices = summary["tool_mix"], env.choices()
  if choices:
    chosen = sum(mix.get(c, 0.0) for c in choices) or 1.0
    mix = {c: mix.get(c, 0.0) / chosen for c in choices}
  result = {
      "mean_reward": float(np.mean(rewards)),
      "accuracy": summary["success_rate"],
      "mean_cost_usd": summary["mean_cost_usd"],
      "mean_latency_s": summary["mean_latency_s"],
      "tool_mix": mix,
      "n": summary["n_tasks"],
      # episodes the environment did not end (out of context, cut at a turn's budget, ...): they
      # score 0 whatever the policy chose, so a budget too small for the longest tasks shows here
      "unfinished": {end: n for end, n in sorted(summary["finish"].items()) if end != EpisodeEnd.ENV},
  }
  if preference is not None:
    result["utility"] = _utility(preference, result)
  if Ability.DECISIONS in env.abilities():
    result["decisions"] = decision_shares(env.decisions([t.calls for t in trajectories]))
  return result


def decision_shares(counts: dict[str, int]) -> dict[str, float | int | None]:
  """The report's view of an environment's decision counts (`Environment.decisions`): a group's
  first key stays a count, its other keys become shares of it, ungrouped keys shares of the
  episodes (None where there was nothing to divide)."""
  share = lambda count, total: count / total if total else None
  result, totals = {}, {}
  for key, count in counts.items():
    group, grouped, _ = key.rpartition(": ")
    if key == "episodes":
      continue
    if not grouped:
      result[key] = share(count, counts["episodes"])
    elif group in totals:
      result[key] = share(count, totals[group])
    else:
      totals[group] = result[key] = count
  return result


def _utility(preference: Preference, point: dict[str, Any]) -> float:
  return preference.utility(point["accuracy"], point["mean_cost_usd"], point["mean_latency_s"])


def evaluate_profiles(env: Environment, rollout: Rollout, config: RunConfig) -> dict[str, dict]:
  """Episodes on held-out tasks under each preference profile (seeded sampling at
  `report.temperature`, the policy as trained; 0 for its greedy choices)."""
  tasks = held_out_tasks(env, config)
  policy = rollout.policy(temperature=config.report.temperature, seed=config.train.seed + 1)
  runs = [(p, env.with_preference(tasks, p)) for p in _profiles(env)] or [(None, tasks)]
  summaries = {}
  for index, (preference, profiled) in enumerate(runs):
    share = process_share(len(profiled))  # each process plays its share, as in training
    trajectories = allgather_lists(rollout.play(env, profiled[share], config.report.samples,
                                                first_group_id=share.start, policy=policy))
    for t in trajectories:
      t.group_id = index  # one normalisation group per profile
    rewards, _ = compute_rewards(trajectories, config.rewards)
    name = preference.name if preference else ALL_TASKS
    summaries[name] = _profile_summary(env, trajectories, rewards, preference)
  return summaries


def _add_utilities(baselines: dict[str, Any], profiles: Sequence[Preference]) -> None:
  """Each baseline's utility under each profile, on the profile's fixed scale: a baseline with
  one point gets `{"utility": {profile: u}}`, one with a point per profile gets `utility` there."""
  for point in baselines.values():
    if _is_per_profile(point):
      for p in profiles:
        if p.name in point:
          point[p.name]["utility"] = _utility(p, point[p.name])
    else:
      point["utility"] = {p.name: _utility(p, point) for p in profiles}


def _is_per_profile(point: dict[str, Any]) -> bool:
  return "accuracy" not in point


def _markdown(report: dict) -> str:
  lines = [f"# toolorch_jax run: {report['env']}", "",
           f"Wall time {report['wall_seconds']:.0f} s, peak memory {report['peak_memory_mib']:.0f} MiB.", "",
           "| stage | profile | reward | accuracy | cost / task (USD) | latency (s) | tool mix | n |"
           " unfinished |",
           "|---|---|---:|---:|---:|---:|---|---:|---|"]
  for stage in ("before", "after"):
    for profile, s in report[stage].items():
      mix = ", ".join(f"{k} {v:.0%}" for k, v in s["tool_mix"].items())
      unfinished = ", ".join(f"{end} {n}" for end, n in s.get("unfinished", {}).items())
      lines.append(f"| {stage} | {profile} | {s['mean_reward']:.3f} | {s['accuracy']:.3f} |"
                   f" {s['mean_cost_usd']:.6f} | {s['mean_latency_s']:.2f} | {mix} | {s['n']} |"
                   f" {unfinished} |")
  if report["baselines"]:
    lines += ["", "| baseline | accuracy | cost / task (USD) |", "|---|---:|---:|"]
    for name, point in report["baselines"].items():
      rows = point.items() if _is_per_profile(point) else [(None, point)]
      for profile, b in rows:
        label = f"{name} at the cost of '{profile}'" if profile else name
        lines.append(f"| {label} | {b['accuracy']:.3f} | {b['mean_cost_usd']:.6f} |")
  lines += _utility_table(report) + _decisions_table(report)
  lines += ["", "| target | met |", "|---|---|"]
  lines += [f"| {name} | {'yes' if met else 'no'} |" for name, met in report["targets"].items()]
  return "\n".join(lines) + "\n"


def _utility_table(report: dict) -> list[str]:
  """Each profile's fixed-scale utility before and after RL and for every baseline."""
  profiles = [p for p, s in report["after"].items() if "utility" in s]
  if not profiles:
    return []
  names = list(report["baselines"])
  lines = ["", "Utility on each profile's fixed scale (accuracy minus cost and latency in the"
           " environment's units):", "",
           "| profile | before | after | " + " | ".join(names) + " |",
           "|---|---:|---:|" + "---:|" * len(names)]
  for profile in profiles:
    cells = []
    for name in names:
      point = report["baselines"][name]
      value = point.get(profile, {}).get("utility") if _is_per_profile(point) else point["utility"].get(profile)
      cells.append("" if value is None else f"{value:.3f}")
    lines.append(f"| {profile} | {report['before'][profile]['utility']:.3f} |"
                 f" {report['after'][profile]['utility']:.3f} | " + " | ".join(cells) + " |")
  return lines


def _decisions_table(report: dict) -> list[str]:
  """The environment's breakdown of decisions per stage and profile, when it gives one."""
  rows = [(stage, profile, s["decisions"]) for stage in ("before", "after")
          for profile, s in report[stage].items() if "decisions" in s]
  if not rows:
    return []
  keys = list(rows[0][2])
  lines = ["", "| stage | profile | " + " | ".join(keys) + " |", "|---|---|" + "---:|" * len(keys)]
  for stage, profile, decisions in rows:
    cells = [f"{v:.3f}" if isinstance(v, float) else "" if v is None else str(v) for v in decisions.values()]
    lines.append(f"| {stage} | {profile} | " + " | ".join(cells) + " |")
  return lines


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
  for name, point in report["baselines"].items():
    if _is_per_profile(point):  # one point per profile, e.g. on the line of random mixing
      ordered = sorted(point.values(), key=lambda b: b["mean_cost_usd"])
      axis.plot([b["mean_cost_usd"] for b in ordered], [b["accuracy"] for b in ordered], "k--d",
                label=name)
    else:
      axis.scatter(point["mean_cost_usd"], point["accuracy"], marker="s", label=name)
  for stage, marker in (("before", "x"), ("after", "o")):
    for profile, s in report[stage].items():
      axis.scatter(s["mean_cost_usd"], s["accuracy"], marker=marker, s=60, label=f"{stage}: {profile}")
  axis.set(xlabel="mean cost per task (USD)", ylabel="accuracy (held out)", title="Accuracy vs cost")
  axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside, not on, the points
  figure.tight_layout()
  figure.savefig(workdir / "accuracy_vs_cost.png", dpi=110)
  plt.close(figure)


def write_report(workdir: Path, config: RunConfig, env: Environment, before: dict, after: dict,
                 wall_seconds: float) -> dict:
  baselines = {}
  if Ability.BASELINES in env.abilities():
    baselines = env.baselines(held_out_tasks(env, config),
                              {p: s["mean_cost_usd"] for p, s in after.items()})
    _add_utilities(baselines, _profiles(env))
  report = {"env": config.env.name, "before": before, "after": after, "baselines": baselines,
            "wall_seconds": wall_seconds,
            "peak_memory_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
  report["targets"] = check_targets(config.report.targets, before, after, baselines)
  (workdir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
  markdown = _markdown(report)
  (workdir / "report.md").write_text(markdown)
  _plots(workdir, report)
  print(markdown)
  return report
