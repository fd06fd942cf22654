"""Batched prefill, multi-step decode, attention over the used cache and KV kept across turns,
each against the engine's one-request, one-step, whole-cache path token for token.

Two drivers serve the whole module (compiling is most of the time here): `reference` on today's
path before batching, `batched` on the defaults; tests read the differences of its counters.
"""

import asyncio
import dataclasses

import numpy as np
import pytest

from tests.serving.conftest import GREETING, WEATHER_QUESTION, WEATHER_TOOL
from toolorch_jax.model import create_model, load_hf
from toolorch_jax.serving import Driver, Engine, EngineClient, EngineConfig, SamplingParams
from toolorch_jax.serving.engine import LIVE_PARAMS, PrefillInput
from toolorch_jax.serving import jetstream_compat as js
from toolorch_jax.tokenizer import Transcript, render_chat

GREEDY = SamplingParams(temperature=0.0)
SIZES = dict(max_slots=4, max_prefill_length=704, max_cache_length=768)
# The path before batching: one prompt per prefill, one step per dispatch, the whole cache.
ONE_BY_ONE = EngineConfig(**SIZES).one_by_one()
BATCHED = EngineConfig(**SIZES, min_attention_length=256)


@pytest.fixture(scope="module")
def tool_caller(tool_calling_model_dir):
  return load_hf(tool_calling_model_dir)[0]


def _serve(model, tokenizer, config):
  driver = Driver(Engine(model, tokenizer, config))
  yield EngineClient(driver)
  driver.stop()
  assert js.thread_failures == []


@pytest.fixture(scope="module")
def reference(tool_caller, tokenizer):
  yield from _serve(tool_caller, tokenizer, ONE_BY_ONE)


@pytest.fixture(scope="module")
def batched(tool_caller, tokenizer):
  yield from _serve(tool_caller, tokenizer, BATCHED)


def generate_all(client, requests):
  """Every (prompt, max_tokens) submitted at once."""
  async def all_at_once():
    return await asyncio.gather(*(client.generate(p, n, GREEDY) for p, n in requests))
  return asyncio.run(all_at_once())


def counted(client, work):
  """work()'s result and how the engine's counters moved meanwhile."""
  before = dataclasses.replace(client.engine.stats)
  result = work()
  after = client.engine.stats
  return result, {f.name: getattr(after, f.name) - getattr(before, f.name)
                  for f in dataclasses.fields(after)}


def chat_prompt(tokenizer, messages, tools=None):
  return tokenizer.encode(render_chat(messages, tools, add_generation_prompt=True,
                                      enable_thinking=False))


@pytest.mark.slow
def test_batched_multistep_greedy_equals_one_request_one_step(tokenizer, reference, batched):
  """Nine requests into four slots: stop tokens (the tool call and the greeting end with
  <|im_end|>), max_tokens of every size, prompts of several lengths."""
  rng = np.random.default_rng(0)
  requests = [(chat_prompt(tokenizer, WEATHER_QUESTION, [WEATHER_TOOL]), 64),
              (chat_prompt(tokenizer, GREETING), 64), (chat_prompt(tokenizer, GREETING), 3)]
  requests += [([int(t) for t in rng.integers(10, tokenizer.vocab_size, size=17 + 7 * i)], 1 + 9 * i)
               for i in range(6)]
  before = generate_all(reference, requests)
  after, moved = counted(batched, lambda: generate_all(batched, requests))
  assert before[0].finish_reason == before[1].finish_reason == "stop"  # stops on the device too
  for old, new in zip(before, after):
    assert new.token_ids == old.token_ids
    assert new.finish_reason == old.finish_reason and new.error is None
    np.testing.assert_allclose(new.logprobs, old.logprobs, atol=1e-4)
  assert moved["prefill_calls"] < len(requests)  # prompts waiting together were prefilled together
  assert moved["decode_dispatches"] < sum(len(r.token_ids) for r in after) / 4


def test_one_prefill_call_for_prompts_of_one_bucket(tokenizer, tiny_config):
  model = create_model(tiny_config, seed=0)
  engine = Engine(model, tokenizer, BATCHED)
  prompts = [np.arange(10, 10 + n) for n in (17, 20, 31, 9)]  # three in bucket 32, one in 16
  prefixes = engine.prefill_batch([PrefillInput(p, GREEDY) for p in prompts], LIVE_PARAMS)
  assert engine.stats.prefill_calls == 2 and engine.stats.prefilled_tokens == 77
  assert prefixes[0].cache is prefixes[1].cache is prefixes[2].cache
  for prompt, prefix in zip(prompts, prefixes):
    alone = engine.prefill(params=LIVE_PARAMS, padded_tokens=PrefillInput(prompt, GREEDY),
                           true_length=len(prompt))
    # Bit for bit: a prompt's numbers never depend on which others arrived with it.
    np.testing.assert_array_equal(prefix.logits[prefix.row], alone.logits[0])
    np.testing.assert_array_equal(prefix.cache.keys[0][prefix.row], alone.cache.keys[0][0])


def next_turn(tokenizer, ids, generated, result):
  """The episode's context after a turn that called a tool: its ids, the tool's result and the
  next generation prompt (a turn cut off by max_tokens is closed here, as a tool call would be)."""
  transcript = Transcript(tokenizer, enable_thinking=False, ids=list(ids), loss_mask=[0] * len(ids))
  transcript.append_generated(generated)
  if not transcript.turn_closed:
    transcript.append_generated([tokenizer.eos_id])
  transcript.append_tool_responses([result])
  return transcript.ids


def play_episode(client, tokenizer, results, first_prompt):
  """Turns, each after the previous turn's tool result; (turns, final context length)."""
  ids, turns = first_prompt, []
  for result in results + [None]:
    generation = asyncio.run(client.generate(ids, 24, GREEDY))
    turns.append(generation.token_ids)
    if result is None:
      return turns, len(ids) + len(generation.token_ids)
    ids = next_turn(tokenizer, ids, generation.token_ids, result)


TOOL_RESULTS = ['{"city": "Paris", "sky": "clear", "celsius": 21}', '{"error": "rate limited"}']
# A system message first: the rendered prompt shares no prefix with the other tests' prompts.
EPISODE = [{"role": "system", "content": "Answer with tools."}] + WEATHER_QUESTION


def test_an_episode_prefills_each_token_about_once(tokenizer, reference, batched):
  prompt = chat_prompt(tokenizer, EPISODE, [WEATHER_TOOL])
  (turns, context), moved = counted(batched, lambda: play_episode(batched, tokenizer, TOOL_RESULTS,
                                                                   prompt))
  (full_turns, full_context), full = counted(
      reference, lambda: play_episode(reference, tokenizer, TOOL_RESULTS, prompt))
  assert turns == full_turns and context == full_context
  assert moved["prefilled_tokens"] <= 1.1 * context
  assert moved["reused_tokens"] > 0 and moved["evicted_reuses"] == 0
  assert full["prefilled_tokens"] > 2 * context  # every turn re-prefilled its whole context


def test_an_evicted_row_falls_back_to_a_full_prefill(tokenizer, reference, batched):
  """The episode's row is overwritten by four other requests between its turns."""
  prompt = chat_prompt(tokenizer, [{"role": "system", "content": "Be brief."}] + WEATHER_QUESTION,
                       [WEATHER_TOOL])
  first = asyncio.run(batched.generate(prompt, 24, GREEDY))
  generate_all(batched, [(list(range(40 + i, 70 + i)), 40) for i in range(4)])  # every slot
  second_ids = next_turn(tokenizer, prompt, first.token_ids, TOOL_RESULTS[0])
  second, moved = counted(batched, lambda: asyncio.run(batched.generate(second_ids, 24, GREEDY)))
  assert moved["reused_tokens"] == 0 and moved["prefilled_tokens"] == len(second_ids)
  assert second.token_ids == generate_all(reference, [(second_ids, 24)])[0].token_ids


def test_the_prefix_store_and_an_overwrite_after_the_lookup(tokenizer, tiny_config):
  """Through the Engine API, one store row: a finished sequence moves to the store when its slot
  is reused, and its next turn extends it from there; a reuse planned at prefill whose row is
  overwritten before the insert falls back to a full prefill. Tokens equal a prefill without reuse."""
  model = create_model(tiny_config, seed=0)
  engine = Engine(model, tokenizer, EngineConfig(max_slots=4, max_prefill_length=64,
                                                 max_cache_length=128, min_attention_length=128,
                                                 prefix_store_rows=1))
  state = engine.init_decode_state()

  def prefill(ids, max_tokens=16):
    return engine.prefill_batch([PrefillInput(np.asarray(ids), GREEDY, max_tokens)])[0]

  def run_to_end(state, slot):
    tokens = []
    while True:
      state, result = engine.generate(LIVE_PARAMS, state)
      rows = np.asarray(result.data)[slot]
      tokens += rows[rows[:, js.COL_VALID] == 1, js.COL_TOKEN].tolist()
      if not rows[:, js.COL_VALID].all():
        engine.ledger.appended(slot, tokens, finished=True, frozen=True)  # as the detokenizer does
        return state, tokens

  def reference(state, ids, slot):
    plain = prefill(ids)
    assert plain.reuse is None
    return run_to_end(engine.insert(plain, state, slot=slot), slot)

  rng = np.random.default_rng(3)
  ids = [int(t) for t in rng.integers(10, tokenizer.vocab_size, 20)]
  state, first = run_to_end(engine.insert(prefill(ids), state, slot=0), 0)
  state, _ = run_to_end(engine.insert(prefill(range(30, 50), 4), state, slot=0), 0)  # saves ids
  second_ids = ids + first + list(range(20, 30))
  planned = prefill(second_ids)
  assert planned.reuse is not None and engine.ledger.in_store(planned.reuse.row)
  assert planned.reuse.length == len(ids) + len(first)
  state, second = run_to_end(engine.insert(planned, state, slot=1), 1)
  assert engine.stats.reused_tokens == len(ids) + len(first)

  other = [int(t) for t in rng.integers(10, tokenizer.vocab_size, 24)]
  state, done = run_to_end(engine.insert(prefill(other), state, slot=2), 2)
  third_ids = other + done + [7] * 5
  planned = prefill(third_ids)
  assert planned.reuse is not None and planned.reuse.row == 2
  state = engine.insert(prefill(range(60, 90), 4), state, slot=2)  # slot 2 given away first...
  state, third = run_to_end(engine.insert(planned, state, slot=3), 3)
  assert engine.stats.evicted_reuses == 1  # ... so its row was found again, in the store
  assert engine.stats.reused_tokens == len(ids) + len(first) + len(other) + len(done)

  planned = prefill(second_ids)
  assert planned.reuse is not None
  engine.ledger.forget()  # every row overwritten between the lookup and the insert
  prefilled = engine.stats.prefilled_tokens
  state, again = run_to_end(engine.insert(planned, state, slot=0), 0)
  assert engine.stats.evicted_reuses == 2
  assert engine.stats.prefilled_tokens - prefilled == len(second_ids)  # a full prefill
  assert again == second
  engine.ledger.forget()
  state, expected = reference(state, third_ids, slot=1)
  assert third == expected

  state, _ = run_to_end(engine.insert(prefill(second_ids), state, slot=2), 2)
  assert prefill(second_ids + [7]).reuse is not None
  engine.update_params(model, version=1)  # cached keys and values belong to the old weights
  assert prefill(second_ids + [7]).reuse is None
