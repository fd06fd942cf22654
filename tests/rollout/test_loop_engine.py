"""The episode loop on the real in-process JetStream engine with a small random model."""

import asyncio
import json

import pytest

pytest.importorskip("jetstream", reason="needs the 'serve' extra and JetStream 0.2.2")

from tests.rollout.scripted_env import KeyValueEnv  # noqa: E402
from toolorch_jax.rollout import EnginePolicy, EpisodeConfig, run_groups  # noqa: E402
from toolorch_jax.rollout.trajectory import NOT_GENERATED  # noqa: E402
from toolorch_jax.datadir import data_path  # noqa: E402
from toolorch_jax.model import create_model, load_model_config  # noqa: E402
from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams  # noqa: E402
from toolorch_jax.tokenizer import load_tokenizer, train_sentencepiece  # noqa: E402


def test_groups_on_the_engine(tmp_path):
  with data_path("gsm8k/test.jsonl").open(encoding="utf-8") as lines:
    questions = [json.loads(line)["question"] for line in lines]
  tokenizer = load_tokenizer(train_sentencepiece(questions, 512, tmp_path))
  model = create_model(load_model_config("tiny").replace(vocab_size=tokenizer.vocab_size), seed=0)
  driver = Driver(Engine(model, tokenizer, EngineConfig(max_slots=8, max_prefill_length=1024,
                                                        max_cache_length=1100)))
  try:
    env = KeyValueEnv()
    policy = EnginePolicy(EngineClient(driver), SamplingParams(temperature=1.0, seed=None))
    config = EpisodeConfig(max_turns=3, max_context=1000, max_new_tokens=24)
    trajectories = asyncio.run(run_groups(env, policy, env.tasks(), 3, tokenizer, config))
  finally:
    driver.stop()
  assert [t.group_id for t in trajectories] == [0, 0, 0, 1, 1, 1]
  for t in trajectories:
    assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs) <= 1000
    assert t.loss_mask[:t.prompt_length] == [0] * t.prompt_length
    assert t.finish in ("no_tool_call", "truncated", "max_turns", "context", "env")
    assert t.policy_versions == [0]
    # each generated token carries the version that produced it, the others NOT_GENERATED
    assert t.token_versions == [0 if m else NOT_GENERATED for m in t.loss_mask]
    generated = [lp for lp, m in zip(t.logprobs, t.loss_mask) if m]
    assert generated and all(lp < 0 for lp in generated)  # sampling log-probs on policy tokens
    assert all(lp == 0 for lp, m in zip(t.logprobs, t.loss_mask) if not m)
    assert len(t.turns) >= 1 and t.outcome == 0.0  # a random model does not find the answer
