"""`toolorch serve` as a real process on loopback: OpenAI client, streaming, gRPC, bad input."""

import asyncio
import json
import os
import re
import subprocess
import sys
import time

import grpc
import httpx
import portpicker
import pytest

openai = pytest.importorskip("openai")

from toolorch_jax.serving import jetstream_compat as js  # noqa: E402
from toolorch_jax.tokenizer import render_chat  # noqa: E402

from tests.serving.conftest import (GREETING, GREETING_ANSWER, WEATHER_ANSWER, WEATHER_QUESTION,  # noqa: E402
                                    WEATHER_TOOL)

NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(scope="module")
def server(tool_calling_model_dir):
  port, grpc_port = portpicker.pick_unused_port(), portpicker.pick_unused_port()
  process = subprocess.Popen(
      [sys.executable, "-m", "toolorch_jax.cli", "serve", "--hf-dir", str(tool_calling_model_dir),
       "--port", str(port), "--grpc-port", str(grpc_port), "--slots", "8",
       "--max-prefill-length", "512", "--max-cache-length", "640", "--decode-steps", "2"],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env={**os.environ, "XLA_FLAGS": ""})
  base = f"http://127.0.0.1:{port}"
  deadline = time.time() + 180
  while time.time() < deadline:
    if process.poll() is not None:
      pytest.fail(f"server exited: {process.stdout.read()}")
    try:
      if httpx.get(f"{base}/health", timeout=1).status_code == 200:
        break
    except httpx.HTTPError:
      time.sleep(0.5)
  else:
    process.kill()
    pytest.fail("server did not become healthy")
  yield base, grpc_port
  process.terminate()
  process.wait(timeout=30)


def client(base):
  return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)


def test_tools_in_tool_calls_out(server, tokenizer):
  base, _ = server
  response = client(base).chat.completions.create(
      model="tool-caller", messages=WEATHER_QUESTION, tools=[WEATHER_TOOL], temperature=0,
      max_tokens=64, extra_body=NO_THINK)
  choice = response.choices[0]
  assert choice.finish_reason == "tool_calls"
  [call] = choice.message.tool_calls
  assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
  prompt = render_chat(WEATHER_QUESTION, [WEATHER_TOOL], add_generation_prompt=True, enable_thinking=False)
  assert response.usage.prompt_tokens == len(tokenizer.encode(prompt))
  assert response.usage.completion_tokens == len(tokenizer.encode(WEATHER_ANSWER))


def test_plain_answer_models_and_health(server):
  base, _ = server
  response = client(base).chat.completions.create(
      model="tool-caller", messages=GREETING, temperature=0, max_tokens=64, extra_body=NO_THINK)
  assert response.choices[0].message.content == GREETING_ANSWER.replace("<|im_end|>", "")
  assert response.choices[0].finish_reason == "stop"
  assert [m.id for m in client(base).models.list().data] == ["tool-caller"]
  health = httpx.get(f"{base}/health").json()
  assert health["status"] == "ok" and health["policy_version"] == 0


def test_stop_strings(server):
  base, _ = server
  response = client(base).chat.completions.create(
      model="tool-caller", messages=GREETING, temperature=0, max_tokens=64, stop=["How"],
      extra_body=NO_THINK)
  assert response.choices[0].message.content == "Hello!"
  assert response.choices[0].finish_reason == "stop"


def test_streaming(server):
  base, _ = server
  chunks = list(client(base).chat.completions.create(
      model="tool-caller", messages=GREETING, temperature=0, max_tokens=64, stream=True,
      extra_body=NO_THINK))
  text = "".join(c.choices[0].delta.content or "" for c in chunks)
  assert text == GREETING_ANSWER.replace("<|im_end|>", "")
  assert len([c for c in chunks if c.choices[0].delta.content]) > 3  # really incremental
  assert chunks[-1].choices[0].finish_reason == "stop"

  chunks = list(client(base).chat.completions.create(
      model="tool-caller", messages=WEATHER_QUESTION, tools=[WEATHER_TOOL], temperature=0,
      max_tokens=64, stream=True, extra_body=NO_THINK))
  assert "".join(c.choices[0].delta.content or "" for c in chunks) == ""  # no raw tags leak
  [call] = chunks[-1].choices[0].delta.tool_calls
  assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
  assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_32_concurrent_clients(server):
  base, _ = server

  async def one(api, i):
    messages, tools = (WEATHER_QUESTION, [WEATHER_TOOL]) if i % 2 else (GREETING, None)
    response = await api.chat.completions.create(
        model="tool-caller", messages=messages, tools=tools, temperature=0, max_tokens=64,
        extra_body=NO_THINK)
    return i, response.choices[0]

  async def all_clients():
    api = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
    return await asyncio.gather(*[one(api, i) for i in range(32)])

  results = asyncio.run(all_clients())
  assert len(results) == 32
  for i, choice in results:
    if i % 2:
      assert choice.message.tool_calls[0].function.name == "get_weather"
    else:
      assert choice.message.content == GREETING_ANSWER.replace("<|im_end|>", "")


def _post(base, body: bytes | dict):
  content = body if isinstance(body, bytes) else json.dumps(body).encode()
  return httpx.post(f"{base}/v1/chat/completions", content=content,
                    headers={"content-type": "application/json"}, timeout=60)


@pytest.mark.parametrize("body,param,message", [
    (b"{not json", None, "not valid JSON"),
    (b"[1, 2]", None, "must be a JSON object"),
    ({"messages": []}, "messages", "'messages' must be a non-empty list"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages", r"messages\[0\] has role 'robot'"),
    ({"messages": [{"role": "user", "content": "word " * 600}]}, "messages", "accepts at most 512"),
    ({"messages": GREETING, "max_tokens": 0}, "max_tokens", "'max_tokens' must be positive"),
    ({"messages": GREETING, "max_tokens": "ten"}, "max_tokens", "must be an integer"),
    ({"messages": GREETING, "temperature": -1}, "temperature", "temperature must be >= 0"),
    ({"messages": GREETING, "n": 2}, "n", "only n=1"),
])
def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(server, body, param, message):
  base, _ = server
  response = _post(base, body)
  assert response.status_code == 400
  error = response.json()["error"]
  assert error["param"] == param
  assert re.search(message, error["message"]), error["message"]
  ok = _post(base, {"messages": GREETING, "temperature": 0, "max_tokens": 8, **NO_THINK})
  assert ok.status_code == 200


def test_clients_that_disconnect_mid_stream_free_their_slots(server):
  base, _ = server
  body = {"messages": GREETING, "temperature": 1.0, "max_tokens": 500, "stream": True, "seed": 1}
  for _ in range(12):  # more than the 8 slots: leaked slots would block the requests below
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as response:
      assert response.status_code == 200
      next(response.iter_lines())
  time.sleep(1.0)
  results = asyncio.run(_many_greetings(base, 8))
  assert all(r == GREETING_ANSWER.replace("<|im_end|>", "") for r in results)


async def _many_greetings(base, count):
  api = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
  responses = await asyncio.gather(*[api.chat.completions.create(
      model="tool-caller", messages=GREETING, temperature=0, max_tokens=64, extra_body=NO_THINK)
      for _ in range(count)])
  return [r.choices[0].message.content for r in responses]


def test_jetstream_grpc_decode(server, tokenizer):
  _, grpc_port = server
  prompt = tokenizer.encode(render_chat(WEATHER_QUESTION, [WEATHER_TOOL], add_generation_prompt=True,
                                        enable_thinking=False))
  with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
    stub = js.jetstream_pb2_grpc.OrchestratorStub(channel)
    request = js.jetstream_pb2.DecodeRequest(
        token_content=js.jetstream_pb2.DecodeRequest.TokenContent(token_ids=prompt), max_tokens=64)
    ids = [t for response in stub.Decode(request, timeout=60)
           for sample in response.stream_content.samples for t in sample.token_ids]
    assert stub.HealthCheck(js.jetstream_pb2.HealthCheckRequest(), timeout=10).is_live
  assert ids == tokenizer.encode(WEATHER_ANSWER)  # greedy by default, stop token included
