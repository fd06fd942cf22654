"""`synthesize`: every domain through its stages, then the domain directories and the stats.

Per domain: environment (database and tool spec: fake data offline, or written by an LLM) ->
candidate tasks (tool chains offline, or LLM-written from intents) -> verification -> optional
pass@k with a policy -> `DIR/<domain>/`. Each stage is cached (`stages.py`); a domain directory is
assembled beside its final place and renamed into it, so a reader never sees half a domain.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any, Mapping

from tqdm import tqdm

from data_synth import description as descriptions
from data_synth import stats as stats_table
from data_synth.fake_db import build_db
from data_synth.records import evolve_depth, tau2_task, toolscale_record
from data_synth.stages import Ledger, StageCache, digest, write_atomic
from data_synth.tasks import DEPTHS, Composer
from data_synth.verify import select
from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.spec_tools import SPEC_FILE, build_domain, db_problems

VERSION = 2  # bump when generation changes, so cached stages are recomputed
CANDIDATES_PER_TASK = 1.2  # candidates drafted per wanted task (verification drops some)


@dataclasses.dataclass
class SynthConfig:
  out: Path
  seed: int = 0
  domains: tuple[str, ...] = descriptions.SHIPPED  # shipped names or description file paths
  tasks: int = 240  # verified tasks wanted per domain
  test_fraction: float = 0.2
  pass_k: int = 0  # 0: no pass@k filter; else tasks no policy attempt solves are dropped
  pass_policy: str = "gold"  # any policy `toolorch eval --policy` accepts
  progress: bool = True
  llm: Any = None  # data_synth.llm.LLMSource in LLM mode

  def __post_init__(self):
    self.out = Path(self.out)
    if self.tasks < 1:
      raise ConfigError(f"tasks: need at least 1, got {self.tasks}")
    if not 0.0 <= self.test_fraction < 1.0:
      raise ConfigError(f"test_fraction: must be in [0, 1), got {self.test_fraction}")
    if self.pass_k < 0:
      raise ConfigError(f"pass_k: must be >= 0, got {self.pass_k}")


def _description(name: str) -> dict[str, Any]:
  return (descriptions.shipped(name) if name in descriptions.SHIPPED
          else descriptions.load_description(name))


def offline_environment(description: Mapping[str, Any], seed: int) -> dict[str, Any]:
  if not description["tools"]:
    raise ConfigError(f"domain '{description['domain']}': offline mode needs tool templates"
                      " in the description (only LLM mode writes its own)")
  return {"db": build_db(description, seed), "spec": descriptions.spec(description)}


def offline_candidates(description: Mapping[str, Any], environment: Mapping[str, Any],
                       count: int, seed: int, progress: bool) -> list[dict[str, Any]]:
  """`count` drafted tasks (fewer if drafts keep failing), as τ² records with their depth."""
  domain = build_domain(environment["spec"])
  composer = Composer(description, domain, environment["db"], seed)
  rng = random.Random(f"{description['domain']}:{seed}:tasks")
  out: list[dict[str, Any]] = []
  bar = tqdm(total=count, desc=f"{description['domain']}: tasks", disable=not progress)
  for _ in range(count * 3):
    if len(out) == count:
      break
    draft = composer.compose(composer.intent(rng), rng.choice(DEPTHS), rng)
    if draft is not None:
      out.append(tau2_task(f"{description['domain']}_{len(out):04d}", description, draft))
      bar.update()
  bar.close()
  return out


def _splits(ids: list[str], fraction: float, seed: int) -> dict[str, list[str]]:
  ranked = sorted(ids, key=lambda task_id: digest(seed, task_id))
  test = set(ranked[:math.floor(len(ids) * fraction)])
  return {"base": ids, "train": [i for i in ids if i not in test],
          "test": [i for i in ids if i in test]}


def write_domain(out: Path, description: Mapping[str, Any], environment: Mapping[str, Any],
                 tasks: list[Mapping[str, Any]], splits: Mapping[str, list[str]]) -> Path:
  """`out/<domain>/`, assembled in `out/.<domain>.partial` and renamed into place."""
  name = description["domain"]
  final, partial = out / name, out / f".{name}.partial"
  shutil.rmtree(partial, ignore_errors=True)
  files = {"db.json": environment["db"], "tasks.json": list(tasks), "split_tasks.json": splits,
           SPEC_FILE: environment["spec"]}
  for file, value in files.items():
    write_atomic(partial / file, json.dumps(value, indent=1, ensure_ascii=False) + "\n")
  write_atomic(partial / "policy.md", descriptions.policy(description))
  shutil.rmtree(final, ignore_errors=True)
  partial.rename(final)
  return final


def _pass_at_k(folder: Path, tasks: list[Mapping[str, Any]], k: int,
               policy: str) -> tuple[list[Mapping[str, Any]], int]:
  """Tasks at least one of k attempts of `policy` solves, through `toolorch eval`'s machinery."""
  from toolorch_jax.envs.tau2.env import Settings, Tau2Environment
  from toolorch_jax.rollout.config import RolloutConfig
  from toolorch_jax.rollout.evaluate import evaluate

  env = Tau2Environment(Settings(domain=str(folder), split="base", mode="solo"))
  runnable = env.tasks("base")
  trajectories = evaluate(env, [t for t in runnable for _ in range(k)], policy,
                          RolloutConfig(temperature=1.0 if k > 1 else 0.0), None, "default")
  solved = {t.task_id for t in trajectories if t.outcome >= 1.0}
  kept = [task for task in tasks if task["id"] in solved]
  return kept, len(tasks) - len(kept)


def synthesize(config: SynthConfig) -> dict[str, Any]:
  """Runs every domain and writes `out/<domain>/`, `out/toolscale.jsonl`, `out/stats.json`,
  `out/stats.md`; returns the stats."""
  ledger = Ledger()
  cache = StageCache(config.out / ".cache", ledger)
  llm = config.llm and dataclasses.replace(config.llm, answers_dir=config.out / ".cache" / "llm")
  rows, lines = [], []
  for name in config.domains:
    description = _description(name)
    domain = description["domain"]
    env_key = digest(VERSION, descriptions.digest(description), config.seed,
                     llm.fingerprint() if llm else "offline")
    environment = cache.run(domain, "environment", env_key, lambda: (
        llm.environment(description, ledger) if llm
        else offline_environment(description, config.seed)))
    problems = db_problems(environment["spec"], environment["db"])
    if problems:
      raise ConfigError(f"domain '{domain}': the database fails validation: {problems[:3]}")
    count = math.ceil(config.tasks * CANDIDATES_PER_TASK)
    tasks_key = digest(env_key, count)
    candidates = cache.run(domain, "tasks", tasks_key, lambda: (
        llm.candidates(description, environment, count, config.seed, ledger,
                              config.progress)
        if llm else offline_candidates(description, environment, count, config.seed,
                                              config.progress)))
    verify_key = digest(tasks_key, "verify")
    verified = cache.run(domain, "verify", verify_key, lambda: _verify(environment, candidates))
    kept, dropped = verified["kept"], dict(verified["dropped"])
    dropped["surplus"] = max(0, len(kept) - config.tasks)
    kept = kept[:config.tasks]
    folder = write_domain(config.out, description, environment, kept,
                          _splits([t["id"] for t in kept], config.test_fraction, config.seed))
    if config.pass_k:
      passed = cache.run(domain, f"pass_at_{config.pass_k}",
                         digest(verify_key, config.tasks, config.pass_k, config.pass_policy),
                         lambda: _pass_at_k(folder, kept, config.pass_k, config.pass_policy)[0])
      dropped[f"pass_at_{config.pass_k}"] = len(kept) - len(passed)
      kept = passed
      folder = write_domain(config.out, description, environment, kept,
                            _splits([t["id"] for t in kept], config.test_fraction, config.seed))
    tools = [tool.schema()["function"] for tool in build_domain(environment["spec"]).bind(
        _empty_db(environment)).values()]
    lines += [json.dumps(toolscale_record(domain, task, tools, evolve_depth(task)), ensure_ascii=False)
              for task in kept]
    rows.append(stats_table.domain_row(domain, environment, len(candidates), kept, dropped))
  write_atomic(config.out / "toolscale.jsonl", "\n".join(lines) + "\n")
  stats = stats_table.build(rows, ledger.rows(), mode="llm" if config.llm else "offline",
                            seed=config.seed)
  write_atomic(config.out / "stats.json", json.dumps(stats, indent=1) + "\n")
  write_atomic(config.out / "stats.md", stats_table.markdown(stats))
  return stats


def _verify(environment: Mapping[str, Any], candidates: list[Mapping[str, Any]]) -> dict[str, Any]:
  kept, dropped = select(build_domain(environment["spec"]), environment["db"], candidates)
  return {"kept": kept, "dropped": dropped}


def _empty_db(environment: Mapping[str, Any]) -> Database:
  return Database({table: {} for table in environment["spec"]["tables"]})

