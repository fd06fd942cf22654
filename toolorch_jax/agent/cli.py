"""`toolorch eval`: play an environment's tasks with a policy; write results and a summary."""

from __future__ import annotations

import argparse
import asyncio
import json

from toolorch_jax.config import ConfigError


def _policy_factory(args, env, tokenizer_path):
  """(tokenizer, make_policy(task), cleanup) for --policy gold | hf:DIR | checkpoint:DIR | URL."""
  from toolorch_jax.agent.policy import EndpointPolicy, EnginePolicy, ScriptedPolicy
  from toolorch_jax.datadir import data_path
  from toolorch_jax.tokenizer import load_tokenizer

  spec = args.policy
  if spec == "gold":
    tokenizer = load_tokenizer(tokenizer_path or data_path("qwen3"))
    return tokenizer, lambda task: ScriptedPolicy(tokenizer, env.gold_script(task),
                                                  args.enable_thinking), lambda: None
  if spec.startswith(("http://", "https://")):
    tokenizer = load_tokenizer(tokenizer_path or data_path("qwen3"))
    policy = EndpointPolicy(tokenizer, spec, args.model, temperature=args.temperature,
                            enable_thinking=args.enable_thinking)
    return tokenizer, lambda task: policy, lambda: None
  kind, _, path = spec.partition(":")
  if kind not in ("hf", "checkpoint") or not path:
    raise ConfigError(f"--policy: '{spec}' is not gold, hf:DIR, checkpoint:DIR or an http(s) URL")
  from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams
  from toolorch_jax.serving.cli import load_model_and_tokenizer

  model, tokenizer = load_model_and_tokenizer(path if kind == "hf" else None,
                                              path if kind == "checkpoint" else None, tokenizer_path)
  driver = Driver(Engine(model, tokenizer, EngineConfig(
      max_slots=args.concurrency, max_prefill_length=args.max_context,
      max_cache_length=args.max_context + args.max_new_tokens)))
  policy = EnginePolicy(EngineClient(driver), SamplingParams(temperature=args.temperature))
  return tokenizer, lambda task: policy, driver.stop


async def _play(env, tasks, make_policy, tokenizer, config):
  from toolorch_jax.agent.loop import run_episode

  limit = asyncio.Semaphore(config.concurrency)

  async def one(index, task):
    async with limit:
      return await run_episode(make_policy(task), env.start(task), tokenizer, config, group_id=index,
                               episode_id=f"{task.task_id}-eval")

  return await asyncio.gather(*[one(i, t) for i, t in enumerate(tasks)])


def cmd_eval(args: argparse.Namespace) -> int:
  from toolorch_jax.agent.evaluate import write_results
  from toolorch_jax.agent.loop import LoopConfig
  from toolorch_jax.envs import load_env

  env = load_env(args.env, args.overrides)
  tasks = list(env.tasks(args.split))[:args.limit or None]
  if not tasks:
    raise ConfigError(f"--split {args.split}: the environment has no tasks there")
  config = LoopConfig(max_turns=args.max_turns, max_context=args.max_context,
                      max_new_tokens=args.max_new_tokens, enable_thinking=args.enable_thinking,
                      concurrency=args.concurrency)
  tokenizer, make_policy, cleanup = _policy_factory(args, env, args.tokenizer)
  try:
    trajectories = asyncio.run(_play(env, tasks, make_policy, tokenizer, config))
  finally:
    cleanup()
  summary = write_results(args.out, trajectories)
  print(json.dumps(summary, indent=2))
  return 0


def add_parser(subparsers) -> None:
  parser = subparsers.add_parser(
      "eval", help="evaluate a policy on an environment's tasks",
      description="Play each task of an environment once with a policy and write DIR/results.jsonl"
      " (one line per task), DIR/trajectories.jsonl and DIR/summary.json (success rate, cost,"
      " latency, tool mix). The data directory comes from $TOOLORCH_DATA_DIR when set.")
  parser.add_argument("--env", required=True, help="environment preset in configs/envs/ or a YAML file")
  parser.add_argument("--policy", required=True,
                      help="gold (replay the tasks' gold solutions), hf:DIR, checkpoint:DIR, or the"
                      " base URL of an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1)")
  parser.add_argument("--out", required=True, help="output directory")
  parser.add_argument("--split", default=None, help="task split (default: the environment's)")
  parser.add_argument("--limit", type=int, default=0, help="evaluate only the first N tasks")
  parser.add_argument("--model", default="default", help="model name sent to an endpoint policy")
  parser.add_argument("--tokenizer", help="tokenizer path (default: the model's, or Qwen3's)")
  parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (0: greedy)")
  parser.add_argument("--max-turns", type=int, default=30)
  parser.add_argument("--max-context", type=int, default=8192, help="tokens per episode")
  parser.add_argument("--max-new-tokens", type=int, default=1024, help="tokens per assistant turn")
  parser.add_argument("--no-thinking", dest="enable_thinking", action="store_false",
                      help="render prompts with enable_thinking=False")
  parser.add_argument("--concurrency", type=int, default=16, help="episodes in flight")
  parser.add_argument("overrides", nargs="*", help="environment config overrides, e.g. settings.split=test")
  parser.set_defaults(func=cmd_eval)
