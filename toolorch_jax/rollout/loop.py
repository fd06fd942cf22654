"""The asynchronous episode loop: policy <-> environment <-> tools, many episodes at once.

Each episode renders its prompt once and then grows append-only: the policy's turn is appended as
generated (loss mask 1), its tool calls run concurrently, and their results are appended as one
tool-response turn (loss mask 0). While one episode waits on a slow tool, the others decode: the
loop is a set of asyncio tasks sharing one policy (the JetStream engine batches their decoding).
Malformed calls, unknown tools and tool errors become observations the policy sees, and counted
faults in the trajectory; nothing raises out of an episode.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Callable, Sequence

from toolorch_jax.data.task import Task
from toolorch_jax.envs.base import Environment, Episode, Reply
from toolorch_jax.rollout.config import EpisodeConfig
from toolorch_jax.rollout.policy import Policy
from toolorch_jax.rollout.trajectory import (NOT_GENERATED, EpisodeEnd, ToolCallRecord, Trajectory,
                                             Turn, TurnEnd)
from toolorch_jax.tokenizer import Tokenizer, Transcript, parse_assistant
from toolorch_jax.tools.base import ToolContext


def _error_observation(message: str) -> str:
  return f"Error: {message}"


def _observation(text: str, config: EpisodeConfig, trajectory: Trajectory) -> str:
  if len(text) <= config.max_observation_chars:
    return text
  trajectory.count_fault("observation_truncated")
  return text[:config.max_observation_chars] + f"\n[truncated: {len(text)} characters in all]"


async def run_episode(policy: Policy, episode: Episode, tokenizer: Tokenizer,
                      config: EpisodeConfig, group_id: int = 0,
                      episode_id: str | None = None) -> Trajectory:
  """Plays one episode to its end and returns its trajectory."""
  start = time.perf_counter()
  task = episode.task
  trajectory = Trajectory(task_id=task.task_id, group_id=group_id,
                          episode_id=episode_id or uuid.uuid4().hex[:12],
                          preference=task.preference.to_dict() if task.preference else None)
  context = ToolContext(episode_id=trajectory.episode_id, timeout_s=config.tool_timeout_s)
  _count_user(trajectory, await episode.begin(context))
  messages = list(episode.messages())
  tools = episode.tool_schemas()
  transcript = Transcript.start(tokenizer, messages, tools, enable_thinking=config.enable_thinking)
  trajectory.prompt_length = len(transcript.ids)
  logprobs = [0.0] * len(transcript.ids)
  versions = [NOT_GENERATED] * len(transcript.ids)  # the policy version that produced each token
  finish = EpisodeEnd.MAX_TURNS
  for turn_index in range(config.max_turns):
    if episode.done:  # ended before the policy's first turn (e.g. the simulated user failed)
      finish = EpisodeEnd.ENV
      break
    budget = min(config.max_new_tokens, config.max_context - len(transcript.ids))
    if budget <= 0:
      finish = EpisodeEnd.CONTEXT
      break
    try:
      turn = await policy.act(transcript.ids, messages, tools, budget, episode_id=trajectory.episode_id)
    except Exception:  # pylint: disable=broad-exception-caught
      trajectory.count_fault("policy_error")
      trajectory.turns.append(Turn("", None, "", [], [], TurnEnd.ERROR))
      finish = EpisodeEnd.POLICY_ERROR
      break
    transcript.append_generated(turn.token_ids)
    logprobs += list(turn.logprobs) or [0.0] * len(turn.token_ids)
    versions += list(turn.versions) or [NOT_GENERATED] * len(turn.token_ids)
    text = tokenizer.decode(turn.token_ids, skip_special_tokens=True)
    parsed = parse_assistant(text, tools)
    record = Turn(text, parsed.reasoning, parsed.content, [],
                  [{"kind": e.kind, "message": e.message} for e in parsed.errors], turn.finish_reason)
    trajectory.turns.append(record)
    messages.append(_assistant_message(parsed))
    if turn.finish_reason == TurnEnd.ERROR:
      trajectory.count_fault("policy_error")
      finish = EpisodeEnd.POLICY_ERROR
      break
    episode.observe(parsed.content, parsed.tool_calls)
    if turn.finish_reason != TurnEnd.STOP or not transcript.turn_closed:
      finish = EpisodeEnd.ENV if episode.done else EpisodeEnd.TRUNCATED
      break
    for error in parsed.errors:
      trajectory.count_fault(f"parse_{error.kind}")
    if not parsed.tool_calls and not parsed.errors:
      reply = None if episode.done else await episode.reply(parsed.content, context)
      _count_user(trajectory, reply)
      if reply is not None:
        record.user = reply.text
      if reply is None or episode.done:
        finish = EpisodeEnd.ENV if episode.done else EpisodeEnd.NO_TOOL_CALL
        break
      messages.append({"role": "user", "content": reply.text})
      transcript.append_user(reply.text)
      logprobs += [0.0] * (len(transcript.ids) - len(logprobs))
      versions += [NOT_GENERATED] * (len(transcript.ids) - len(versions))
      continue
    results = await asyncio.gather(*[episode.execute(call, context) for call in parsed.tool_calls])
    observations = []
    for call, result in zip(parsed.tool_calls, results):
      trajectory.calls.append(ToolCallRecord(turn_index, call.name, call.arguments, result.text,
                                             result.error, result.cost_usd, result.latency_s,
                                             result.metadata))
      if result.error:
        trajectory.count_fault("tool_error")
      text = _error_observation(result.error) if result.error else result.text
      observations.append(_observation(text, config, trajectory))
      messages.append({"role": "tool", "content": observations[-1], "name": call.name})
    for error in parsed.errors:
      observations.append(_error_observation(error.message))
      messages.append({"role": "tool", "content": observations[-1]})
    record.observations = observations
    if episode.done:
      finish = EpisodeEnd.ENV
      break
    transcript.append_tool_responses(observations)
    logprobs += [0.0] * (len(transcript.ids) - len(logprobs))
    versions += [NOT_GENERATED] * (len(transcript.ids) - len(versions))
  trajectory.token_ids, trajectory.loss_mask = transcript.ids, transcript.loss_mask
  trajectory.logprobs = logprobs[:len(transcript.ids)]
  trajectory.finish = finish
  trajectory.token_versions = versions[:len(transcript.ids)]
  trajectory.policy_versions = sorted(set(trajectory.token_versions) - {NOT_GENERATED})
  trajectory.outcome = float(episode.score())
  trajectory.wall_s = time.perf_counter() - start
  return trajectory


def _count_user(trajectory: Trajectory, reply: Reply | None) -> None:
  if reply is not None:
    trajectory.user_cost_usd += reply.cost_usd
    trajectory.user_latency_s += reply.latency_s


def _assistant_message(parsed) -> dict:
  message = {"role": "assistant", "content": parsed.content}
  if parsed.reasoning is not None:
    message["reasoning_content"] = parsed.reasoning
  if parsed.tool_calls:
    message["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in parsed.tool_calls]
  return message


async def run_groups(env: Environment, policy: Policy | Callable[[Task], Policy],
                     tasks: Sequence[Task], group_size: int, tokenizer: Tokenizer,
                     config: EpisodeConfig, first_group_id: int = 0) -> list[Trajectory]:
  """`group_size` episodes per task (one group id per task), at most `config.concurrency` at once;
  ordered by group. `policy` is one policy for all, or a function giving each task its own (a
  gold replay)."""
  policy_for = policy if callable(policy) else lambda task: policy
  limit = asyncio.Semaphore(config.concurrency)

  async def one(task: Task, group_id: int, index: int) -> Trajectory:
    async with limit:
      return await run_episode(policy_for(task), env.start(task), tokenizer, config, group_id,
                               f"{task.task_id}-g{group_id}-{index}")

  jobs = [one(task, first_group_id + g, i) for g, task in enumerate(tasks) for i in range(group_size)]
  return list(await asyncio.gather(*jobs))
