"""A warm start chosen by the run's reward: rejection sampling over the branches of one decision.

The environment gives each drawn task every way its demonstration can go at one decision
(`Environment.demonstration_branches`: after consulting an expert, accept its answer or escalate).
Each branch is played through the episode loop as a script, so the environment executes its calls,
charges their cost and latency and scores the outcome, and the run's own reward scores the branches
of a task against each other. The best one is the demonstration, drawn at random among the best
on a tie (so the environment's order of the choices decides nothing). This is
rejection-sampling fine-tuning (RAFT, ReST) with every branch tried rather than sampled: what the
warm start imitates is what the reward said of each choice on the training split, never a rule
written for the task.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Sequence

import numpy as np

from toolorch_jax.envs.base import Ability, Branches, Environment, Script
from toolorch_jax.rewards.base import RewardConfig, compute_rewards
from toolorch_jax.rollout.config import EpisodeConfig
from toolorch_jax.rollout.loop import run_episode
from toolorch_jax.rollout.policy import ScriptedPolicy
from toolorch_jax.rollout.summary import summarize
from toolorch_jax.rollout.trajectory import EpisodeEnd, Trajectory
from toolorch_jax.tokenizer import Tokenizer


@dataclasses.dataclass
class Selection:
  """The chosen demonstrations and what choosing them measured (`warmstart/selection.json`)."""

  demonstrations: list[dict[str, Any]]
  summary: dict[str, Any]


def replay(demonstration: dict[str, Any]) -> Script:
  """A script making the demonstration's assistant turns in order (then an empty turn, which
  ends an episode that asks for more)."""
  turns = iter([m for m in demonstration["messages"] if m.get("role") == "assistant"])
  return lambda messages, tools: next(turns, {"role": "assistant", "content": ""})


async def _play(env: Environment, groups: Sequence[Branches], pairs: Sequence[tuple[int, int]],
                tokenizer: Tokenizer, config: EpisodeConfig) -> list[Trajectory]:
  """One episode per (group, branch) of `pairs`, in that order; a group's id is its index."""
  limit = asyncio.Semaphore(config.concurrency)

  async def one(group_id: int, branch: int) -> Trajectory:
    group = groups[group_id]
    policy = ScriptedPolicy(tokenizer, replay(group.demonstrations[branch]), config.enable_thinking)
    async with limit:
      return await run_episode(policy, env.start(group.task), tokenizer, config, group_id,
                               f"{group.task.task_id}-g{group_id}-b{branch}")

  return list(await asyncio.gather(*[one(g, b) for g, b in pairs]))


def select_branches(env: Environment, groups: Sequence[Branches], rewards: RewardConfig,
                    tokenizer: Tokenizer, config: EpisodeConfig, seed: int) -> Selection:
  """Plays every branch, scores each task's branches together with `rewards`, keeps the best
  (one drawn with `seed` among those that tie).

  The summary holds the chosen demonstrations' mean reward beside the mean over all branches
  (what a random choice would train on), how many choices are not the first branch, the branches
  the environment did not end, the chosen episodes' tool mix under each preference profile, and,
  where the environment breaks decisions down, that breakdown of the chosen episodes."""
  pairs = [(g, b) for g, group in enumerate(groups) for b in range(len(group.demonstrations))]
  trajectories = asyncio.run(_play(env, groups, pairs, tokenizer, config))
  reward, _ = compute_rewards(trajectories, rewards)
  rng = np.random.default_rng(seed)
  chosen, start = [], 0  # indices into pairs of each group's chosen branch
  for group in groups:
    scores = reward[start:start + len(group.demonstrations)]
    chosen.append(start + int(rng.choice(np.flatnonzero(scores == scores.max()))))
    start += len(group.demonstrations)
  summary = {
      "tasks": len(groups), "branches": len(pairs),
      "mean_reward_chosen": float(np.mean(reward[chosen])),
      "mean_reward_all_branches": float(np.mean(reward)),
      "not_first_branch": sum(pairs[i][1] != 0 for i in chosen),
      "not_ended_by_env": sum(t.finish != EpisodeEnd.ENV for t in trajectories),
      "profile_tool_mix": summarize([trajectories[i] for i in chosen])["profile_tool_mix"]}
  if Ability.DECISIONS in env.abilities():
    summary["decisions"] = env.decisions([trajectories[i].calls for i in chosen])
  return Selection([groups[g].demonstrations[b] for g, b in (pairs[i] for i in chosen)], summary)
