"""The JetStream engine and driver against direct model calls."""

import asyncio
import queue
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from toolorch_jax.model import MeshConfig, create_model, make_mesh
from toolorch_jax.serving import (Driver, Engine, EngineClient, EngineConfig, RequestError,
                                  SamplingParams)
from toolorch_jax.serving.driver import GenerationRequest
from toolorch_jax.serving.engine import LIVE_PARAMS, PrefillInput
from toolorch_jax.serving import jetstream_compat as js

GREEDY = SamplingParams(temperature=0.0)


REFERENCE_LENGTH = 192


@nnx.jit
def _last_logits(model, tokens, length):
  """Full forward over a right-padded buffer (one compiled shape); logits at position length-1."""
  mask = (jnp.arange(tokens.shape[1]) < length)[None].astype(jnp.int32)
  logits, _ = model(tokens, jnp.arange(tokens.shape[1])[None], attention_mask=mask)
  return logits[0, length - 1]


def direct_greedy(model, prompt, max_tokens, stop_ids):
  """Reference decoding without a cache: the whole sequence re-run for every new token."""
  ids, out = list(prompt), []
  for _ in range(max_tokens):
    buffer = np.zeros((1, REFERENCE_LENGTH), np.int32)
    buffer[0, :len(ids)] = ids
    token = int(jnp.argmax(_last_logits(model, jnp.asarray(buffer), len(ids))))
    out.append(token)
    ids.append(token)
    if token in stop_ids:
      break
  return out


def prompts(count, vocab, stop_ids, seed=0):
  rng = np.random.default_rng(seed)
  result = []
  for i in range(count):
    ids = rng.integers(10, vocab, size=2 + 7 * i)
    result.append([int(t) for t in ids if t not in stop_ids])
  return result


@pytest.fixture
def serving(tokenizer, tiny_config):
  """(model, engine, driver, client) with 4 slots, so 12 requests must share and reuse slots."""
  model = create_model(tiny_config, seed=0)
  engine = Engine(model, tokenizer, EngineConfig(max_slots=4, max_prefill_length=128,
                                                 max_cache_length=160))
  driver = Driver(engine)
  yield model, engine, driver, EngineClient(driver)
  driver.stop()
  assert js.thread_failures == []  # every test runs its own event loop: none may break the driver


def run(coroutine):
  return asyncio.run(coroutine)


async def gather(coroutines):
  return await asyncio.gather(*coroutines)


def test_concurrent_greedy_equals_direct_decoding(serving, tokenizer):
  model, _, _, client = serving
  batch = prompts(12, tokenizer.vocab_size, tokenizer.stop_ids)
  assert sorted(len(p) for p in batch) == [len(p) for p in batch]  # 12 different lengths

  results = run(gather(client.generate(p, 10, GREEDY) for p in batch))
  for prompt, result in zip(batch, results):
    assert result.error is None
    assert result.token_ids == direct_greedy(model, prompt, 10, tokenizer.stop_ids)
    assert result.finish_reason in ("stop", "length") and result.policy_versions == [0]
    assert len(result.logprobs) == len(result.token_ids) and max(result.logprobs) <= 0


def test_greedy_logprob_is_the_model_log_softmax(serving, tokenizer):
  model, _, _, client = serving
  prompt = prompts(3, tokenizer.vocab_size, tokenizer.stop_ids)[2]
  result = run(client.generate(prompt, 1, GREEDY))
  logits, _ = model(jnp.asarray([prompt]), jnp.arange(len(prompt))[None])
  expected = jax.nn.log_softmax(logits[0, -1])[result.token_ids[0]]
  assert abs(result.logprobs[0] - float(expected)) < 1e-4


def test_update_params_switches_weights_and_versions(serving, tokenizer, tiny_config):
  _, engine, _, client = serving
  batch = prompts(4, tokenizer.vocab_size, tokenizer.stop_ids, seed=1)
  new_model = create_model(tiny_config, seed=1)
  engine.update_params(new_model, version=1)
  results = run(gather(client.generate(p, 8, GREEDY) for p in batch))
  for prompt, result in zip(batch, results):
    assert result.token_ids == direct_greedy(new_model, prompt, 8, tokenizer.stop_ids)
    assert result.policy_versions == [1] and set(result.versions) == {1}


def test_a_swap_during_generation_is_recorded_per_token(serving, tokenizer, tiny_config):
  """Driven dispatch by dispatch through the Engine API, as JetStream's driver does."""
  _, engine, _, _ = serving
  steps = engine.config.decode_steps
  prompt = prompts(2, tokenizer.vocab_size, tokenizer.stop_ids, seed=2)[1]
  prefix = engine.prefill(params=LIVE_PARAMS, padded_tokens=PrefillInput(np.asarray(prompt), GREEDY),
                          true_length=len(prompt))
  state = engine.insert(prefix, engine.init_decode_state(), slot=1)
  versions = []
  for dispatch in range(4):
    if dispatch == 2:
      engine.update_params(create_model(tiny_config, seed=2), version=7)
    state, result = engine.generate(LIVE_PARAMS, state)
    rows = np.asarray(result.data)[1]
    assert rows[:, js.COL_VALID].all()  # no stop id here: nothing ends it within 4 dispatches
    versions += rows[:, js.COL_VERSION].tolist()
  # A token's version is that of the forward pass that computed its logits: the step before.
  assert versions == [0] * (2 * steps + 1) + [7] * (2 * steps - 1)


def test_both_weight_layouts_serve_the_same_tokens(tokenizer, tiny_config):
  """An engine serving an [out, in] copy gives the greedy tokens of the model's own [in, out]
  weights, and takes updates in the model's layout."""
  assert EngineConfig().served_layout(tiny_config) == "in_out"
  assert EngineConfig(weight_layout="out_in").served_layout(tiny_config) == "out_in"
  with pytest.raises(ValueError, match="weight_layout"):
    EngineConfig(weight_layout="transposed")
  model = create_model(tiny_config, seed=0)
  batch = prompts(6, tokenizer.vocab_size, tokenizer.stop_ids)
  served = {}
  for layout in ("in_out", "out_in"):
    engine = Engine(model, tokenizer, EngineConfig(max_slots=4, max_prefill_length=128,
                                                   max_cache_length=160, weight_layout=layout))
    assert engine.model_config.weight_layout == layout
    engine.update_params(create_model(tiny_config, seed=4), version=1)
    driver = Driver(engine)
    served[layout] = run(gather(EngineClient(driver).generate(p, 8, GREEDY) for p in batch))
    driver.stop()
  reference = create_model(tiny_config, seed=4)
  for prompt, in_out, out_in in zip(batch, served["in_out"], served["out_in"]):
    assert out_in.token_ids == in_out.token_ids == direct_greedy(reference, prompt, 8, tokenizer.stop_ids)
    np.testing.assert_allclose(out_in.logprobs, in_out.logprobs, atol=1e-5)
    assert out_in.policy_versions == [1]


def test_sampling_settings(serving, tokenizer):
  _, _, _, client = serving
  prompt = prompts(2, tokenizer.vocab_size, tokenizer.stop_ids, seed=4)[1]
  seeded = SamplingParams(temperature=1.0, top_p=0.9, seed=11)
  first, second = run(gather(client.generate(prompt, 12, seeded) for _ in range(2)))
  assert first.token_ids == second.token_ids  # same seed, same tokens, whatever the slot
  greedy = run(client.generate(prompt, 12, GREEDY))
  top1 = run(client.generate(prompt, 12, SamplingParams(temperature=0.7, top_k=1, seed=5)))
  assert top1.token_ids == greedy.token_ids
  assert all(abs(lp) < 1e-5 for lp in top1.logprobs)  # only one token left to sample from
  hot = run(client.generate(prompt, 12, SamplingParams(temperature=5.0, seed=6)))
  assert hot.token_ids != greedy.token_ids


@pytest.mark.parametrize("prompt,max_tokens,message", [
    ([], 5, "the prompt is empty"),
    (list(range(10, 140)), 5, "the prompt has 130 tokens; this engine accepts at most 128"),
    ([5, -1, 7], 5, r"token ids \[-1\] are outside the vocabulary"),
    ([5, 10**6], 5, r"token ids \[1000000\] are outside the vocabulary"),
    ([5, 6], 0, "max_tokens must be a positive integer"),
    ([5, 6], -3, "max_tokens must be a positive integer"),
])
def test_bad_requests_are_rejected_by_the_client(serving, prompt, max_tokens, message):
  _, _, _, client = serving
  with pytest.raises(RequestError, match=message):
    run(client.generate(prompt, max_tokens, GREEDY))


def test_a_bad_request_inside_the_driver_fails_alone(serving, tokenizer):
  """Bypassing the client's checks: the engine fails that request and keeps serving others."""
  model, _, driver, client = serving
  good = prompts(3, tokenizer.vocab_size, tokenizer.stop_ids)[2]

  async def mixed():
    channel = js.async_multifuture.AsyncMultifuture()
    driver.place_request_on_prefill_queue(GenerationRequest(
        max_tokens=5, return_channel=channel, prefill_content=[1, 99999],
        is_client_side_tokenization=True))
    ok = asyncio.ensure_future(client.generate(good, 6, GREEDY))
    samples = [s async for batch in channel for s in batch]
    return samples, await ok

  samples, ok = run(mixed())
  assert samples[-1].finish_reason == "error" and "outside the vocabulary" in samples[-1].error
  assert ok.token_ids == direct_greedy(model, good, 6, tokenizer.stop_ids)


def test_a_full_cache_ends_the_sequence(tokenizer, tiny_config):
  model = create_model(tiny_config, seed=0)
  driver = Driver(Engine(model, tokenizer, EngineConfig(max_slots=2, max_prefill_length=16,
                                                        max_cache_length=24)))
  try:
    prompt = prompts(3, tokenizer.vocab_size, tokenizer.stop_ids)[2][:16]
    result = run(EngineClient(driver).generate(prompt, 100, SamplingParams(temperature=1.0, seed=1)))
    if result.finish_reason == "length":  # a stop token may legitimately come first
      assert len(result.token_ids) == 24 - len(prompt) + 1
  finally:
    driver.stop()


def test_a_rematerialised_model_serves_as_the_plain_one(tokenizer, tiny_config):
  """The 0.6B and larger presets rematerialise their layers (remat: full). The engine runs the
  model inside lax.map and while_loop bodies, where nnx.remat's write-back of the layer failed
  (TraceContextError); the greedy tokens are those of the same weights without remat."""
  batch = prompts(4, tokenizer.vocab_size, tokenizer.stop_ids)
  model = create_model(tiny_config.replace(remat="full"), seed=0)
  driver = Driver(Engine(model, tokenizer, EngineConfig(max_slots=2, max_prefill_length=64,
                                                        max_cache_length=96)))
  try:
    results = run(gather(EngineClient(driver).generate(p, 8, GREEDY) for p in batch))
  finally:
    driver.stop()
  plain = create_model(tiny_config, seed=0)
  for prompt, result in zip(batch, results):
    assert result.error is None
    assert result.token_ids == direct_greedy(plain, prompt, 8, tokenizer.stop_ids)


def test_ids_past_the_tokenizer_are_never_sampled(tokenizer, tiny_config):
  """An embedding larger than the tokenizer (Qwen3 pads its own): ids the tokenizer cannot decode
  are never produced, greedy or sampled; 2 of 3 of this model's ids are such."""
  model = create_model(tiny_config.replace(vocab_size=3 * tokenizer.vocab_size), seed=0)
  driver = Driver(Engine(model, tokenizer, EngineConfig(max_slots=4, max_prefill_length=64,
                                                        max_cache_length=96)))
  try:
    client = EngineClient(driver)
    prompt = prompts(3, tokenizer.vocab_size, tokenizer.stop_ids)[2]
    results = run(gather([client.generate(prompt, 24, GREEDY)] + [
        client.generate(prompt, 24, SamplingParams(temperature=1.0, seed=s)) for s in range(3)]))
  finally:
    driver.stop()
  produced = [t for r in results for t in r.token_ids]
  assert len(produced) >= 4 and max(produced) < tokenizer.vocab_size
  tokenizer.decode(produced)  # every id decodes


def test_sharded_serving_mesh_and_resharded_update(tokenizer, tiny_config):
  model = create_model(tiny_config, seed=0)
  serve_mesh = make_mesh(MeshConfig(data=1, fsdp=4, tensor=2))
  engine = Engine(model, tokenizer, EngineConfig(max_slots=2, max_prefill_length=64,
                                                 max_cache_length=96), mesh=serve_mesh)
  driver = Driver(engine)
  try:
    client = EngineClient(driver)
    batch = prompts(4, tokenizer.vocab_size, tokenizer.stop_ids, seed=5)
    results = run(gather(client.generate(p, 6, GREEDY) for p in batch))
    for prompt, result in zip(batch, results):
      assert result.token_ids == direct_greedy(model, prompt, 6, tokenizer.stop_ids)
    trained = create_model(tiny_config, mesh=make_mesh(MeshConfig(fsdp=8)), seed=3)  # trainer mesh
    engine.update_params(trained, version=2)
    result = run(client.generate(batch[1], 6, GREEDY))
    reference = create_model(tiny_config, seed=3)
    assert result.token_ids == direct_greedy(reference, batch[1], 6, tokenizer.stop_ids)
    assert result.policy_versions == [2]
  finally:
    driver.stop()


class _SlotsFreedInTheGap(queue.Queue):
  """The driver's free-slot queue, with JetStream's race forced: when the generate thread puts
  back a slot it found no request for, it waits (up to 2 s) until the detokenize thread frees
  one too, which is the interleaving that made JetStream's generate loop assert and die."""

  freed = threading.Event()

  def put(self, item, block=True, timeout=None):
    super().put(item, block, timeout)
    if threading.current_thread().name.startswith("generate"):
      self.freed.wait(2.0)
      self.freed.clear()
    else:
      self.freed.set()


def test_the_generate_loop_survives_jetstreams_slot_race(tokenizer, tiny_config):
  model = create_model(tiny_config, seed=0)
  engine = Engine(model, tokenizer, EngineConfig(max_slots=2, max_prefill_length=64,
                                                 max_cache_length=96, decode_steps=4))
  driver = Driver(engine)
  driver._generate_slots[0].__class__ = _SlotsFreedInTheGap  # pylint: disable=protected-access
  failures = len(js.thread_failures)
  client = EngineClient(driver)
  prompt = prompts(3, tokenizer.vocab_size, tokenizer.stop_ids)[2]
  try:
    # each request ends in one dispatch, while the generate thread waits; every slot it puts back
    # idle can wait 2 s, so under a loaded test run a request may take many of them (it once timed
    # out at 30 s in a `-n 2` run)
    for _ in range(3):
      result = run(asyncio.wait_for(client.generate(prompt, 4, GREEDY), timeout=120))
      assert result.token_ids == direct_greedy(model, prompt, 4, tokenizer.stop_ids)
  finally:
    driver.stop()
  assert engine.stats.generate_restarts >= 1  # the race did happen, and the loop went on
  assert len(js.thread_failures) == failures
