"""LLM expert against real HTTP servers on 127.0.0.1: a correct one, and one injecting faults."""

import asyncio
import json
import random
import re

import pytest

from tests.tools.loopback import completion, serve
from toolorch_jax.tools import Limits, ModelCatalog, ModelSpec, Price, ToolContext
from toolorch_jax.tools.http_retry import RetryPolicy
from toolorch_jax.tools.llm_expert import LLMExpert, LLMExpertSettings

KEY_ENV = "TOOLORCH_TEST_LLM_KEY"
KEY = "sk-test-4f1c2d9e8b7a6f5e"
FAST = dict(backoff_s=0.01, max_backoff_s=0.05, timeout_s=0.5)


def make_expert(url, *, attempts=4, api_key_env="", limits=None, system_prompt="Be brief."):
  models = ModelCatalog.build(
      {"gpt-5": ModelSpec(base_url=f"{url}/v1", api_key_env=api_key_env, backend="api",
                          price=Price(per_mtok_input=1.25, per_mtok_output=10.0))},
      {"answer-1": "gpt-5"})
  settings = LLMExpertSettings(models=["answer-1"], system_prompt=system_prompt,
                               retry=RetryPolicy(max_attempts=attempts, **FAST))
  return LLMExpert("answer", settings, models=models, limits=limits)


def call(tool, arguments, context=None):
  return asyncio.run(tool.call(arguments, context))


def multiplier(seen):
  """A tiny honest model: answers 'What is A times B?' and reports word counts as usage."""
  words = sum(len(m["content"].split()) for m in seen.body["messages"])
  a, b = map(int, re.findall(r"\d+", seen.body["messages"][-1]["content"]))
  return ("json", 200, completion(str(a * b), words, 1, seen.body["model"]))


def test_correct_answer_and_cost_from_usage():
  with serve([multiplier]) as server:
    result = call(make_expert(server.url), {"model": "answer-1", "prompt": "What is 6 times 7?"})
  assert result.ok, result.error
  assert result.text == "42"
  (request,) = server.requests
  assert request.path == "/v1/chat/completions"
  assert request.body["model"] == "gpt-5"  # the alias resolved to the served name
  assert request.body["messages"] == [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "What is 6 times 7?"}]
  assert "authorization" not in {k.lower() for k in request.headers}  # no key configured, none sent
  assert result.metadata | {"failures": None} == result.metadata | {
      "model": "gpt-5", "alias": "answer-1", "input_tokens": 7, "output_tokens": 1,
      "tokens_estimated": False, "finish_reason": "stop", "attempts": 1, "failures": None}
  assert result.cost_usd == pytest.approx((7 * 1.25 + 1 * 10.0) / 1e6)
  assert result.latency_s > 0


def test_messages_instead_of_prompt_and_missing_usage_is_estimated():
  body = completion("fine", 0, 0)
  del body["usage"]
  with serve([("json", 200, body)]) as server:
    tool = make_expert(server.url, system_prompt="")
    both = call(tool, {"prompt": "a", "messages": [{"role": "user", "content": "b"}]})
    result = call(tool, {"messages": [{"role": "user", "content": "x" * 40}]})
  assert "exactly one of 'prompt' and 'messages'" in both.error
  assert result.ok and result.metadata["tokens_estimated"]
  assert (result.metadata["input_tokens"], result.metadata["output_tokens"]) == (10, 1)
  assert server.requests[0].body["messages"] == [{"role": "user", "content": "x" * 40}]


FAULTS = {
    "429": ("json", 429, {"error": "rate limited"}, {"retry-after": "0"}),
    "500": ("json", 500, {"error": "internal"}),
    "slow": ("slow", 1.0, ("json", 200, completion("late", 1, 1))),
    "malformed": ("raw", 200, '{"choices": [ {"message": '),
    "no choices": ("json", 200, {"object": "chat.completion"}),
    "dropped": ("drop",),
}
EXPECTED = {"429": "HTTP 429", "500": "HTTP 500", "slow": "timeout after 0.5 s (ReadTimeout)",
            "malformed": "malformed response (JSONDecodeError",
            "no choices": "malformed response (KeyError: 'choices')",
            "dropped": "connection error (RemoteProtocolError"}


def test_every_fault_then_success():
  """One of each fault, then an answer: five retries, the failures listed in order."""
  script = [FAULTS[name] for name in FAULTS] + [("json", 200, completion("ok", 3, 1))]
  with serve(script) as server:
    result = call(make_expert(server.url, attempts=len(script)), {"prompt": "hi"})
  assert result.ok, result.error
  assert result.text == "ok" and result.metadata["attempts"] == len(script)
  assert len(server.requests) == len(script)
  for failure, name in zip(result.metadata["failures"], FAULTS):
    assert EXPECTED[name] in failure


@pytest.mark.parametrize("fault", list(FAULTS))
def test_persistent_fault_gives_up_after_bounded_retries(fault):
  with serve([FAULTS[fault]]) as server:
    result = call(make_expert(server.url, attempts=3), {"prompt": "hi"})
  assert len(server.requests) == 3
  assert result.error.startswith(f"gave up on {server.url}/v1/chat/completions after 3 attempts;")
  assert EXPECTED[fault] in result.error
  assert result.metadata["attempts"] == 3 and len(result.metadata["failures"]) == 3
  assert result.cost_usd == 0.0 and result.text == ""


def test_connection_refused_is_retried_then_reported():
  with serve([("drop",)]) as server:
    url = server.url
  result = call(make_expert(url, attempts=2), {"prompt": "hi"})  # the server is gone now
  assert "after 2 attempts" in result.error and "ConnectError" in result.error


def test_client_error_is_not_retried():
  with serve([("json", 400, {"error": "unknown model"})]) as server:
    result = call(make_expert(server.url), {"prompt": "hi"})
  assert len(server.requests) == 1
  assert result.error == (f"{server.url}/v1/chat/completions refused the request: HTTP 400:"
                          ' {"error": "unknown model"}')


def test_api_key_sent_but_never_shown(monkeypatch, caplog):
  monkeypatch.setenv(KEY_ENV, KEY)
  echo = lambda seen: ("raw", 500, f"bad gateway; you sent {seen.headers.get('Authorization')}")
  with serve([echo]) as server:
    result = call(make_expert(server.url, attempts=2, api_key_env=KEY_ENV), {"prompt": "hi"})
  assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.requests)
  assert "[redacted]" in result.error
  shown = json.dumps(result.to_dict()) + caplog.text
  assert KEY not in shown


def test_missing_api_key_names_the_variable(monkeypatch):
  monkeypatch.delenv(KEY_ENV, raising=False)
  with serve([multiplier]) as server:
    result = call(make_expert(server.url, api_key_env=KEY_ENV), {"prompt": "What is 1 times 1?"})
  assert result.error == f"model 'gpt-5' needs an API key: set the environment variable {KEY_ENV}"
  assert server.requests == []


def test_caller_deadline_cuts_a_slow_server():
  with serve([("slow", 2.0, ("json", 200, completion("late", 1, 1)))]) as server:
    tool = make_expert(server.url)
    tool.settings.retry.timeout_s = 5.0
    result = call(tool, {"prompt": "hi"}, ToolContext(timeout_s=0.2))
  assert result.error == "timed out after 0.2 s (caller's deadline)"


@pytest.mark.parametrize("cap", [1, 3])
def test_backend_concurrency_limit(cap):
  async def many(tool):
    return await asyncio.gather(*(tool.call({"prompt": "What is 2 times 3?"}) for _ in range(6)))

  with serve([lambda seen: ("slow", 0.15, multiplier(seen))]) as server:
    results = asyncio.run(many(make_expert(server.url, limits=Limits({"api": cap}))))
  assert all(r.text == "6" for r in results)
  assert 1 <= server.max_in_flight <= cap
  if cap > 1:
    assert server.max_in_flight > 1


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after():
  policy = RetryPolicy(backoff_s=1.0, max_backoff_s=8.0)
  rng = random.Random(0)
  for attempt, step in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
    delays = [policy.delay(attempt, None, rng) for _ in range(200)]
    assert step / 2 <= min(delays) and max(delays) <= step
    assert max(delays) - min(delays) > step / 4  # jittered, not fixed
  assert policy.delay(1, 5.0, rng) == 5.0   # Retry-After wins when longer ...
  assert policy.delay(1, 60.0, rng) == 8.0  # ... up to the cap
