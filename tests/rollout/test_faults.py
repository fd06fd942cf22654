"""Fault suite: 1,000 episodes against tools that time out, crash, fail over HTTP or flood output."""

import asyncio
import collections
import http.server
import threading

import httpx
import pytest

from toolorch_jax.rollout import EpisodeConfig, ScriptedPolicy, run_groups
from toolorch_jax.datadir import data_path
from toolorch_jax.data import Task
from toolorch_jax.envs import Environment, Episode
from toolorch_jax.tokenizer import load_tokenizer
from toolorch_jax.tools.base import Limits, Tool, ToolError, ToolResult

FAULTS = ["timeout", "exception", "http_5xx", "huge_output", "malformed"]
EPISODES = 1000


class Failing500(http.server.BaseHTTPRequestHandler):
  def do_GET(self):  # noqa: N802
    self.send_response(503)
    self.end_headers()
    self.wfile.write(b"upstream unavailable")

  def log_message(self, *args):
    pass


@pytest.fixture(scope="module")
def failing_url():
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing500, bind_and_activate=False)
  server.request_queue_size = 1024  # the default backlog of 5 would stall hundreds of clients
  server.server_bind()
  server.server_activate()
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{server.server_port}/"
  server.shutdown()


class FaultTool(Tool):
  parameters = {"type": "object", "properties": {}}

  def __init__(self, name, url):
    super().__init__(name, limits=Limits(default=EPISODES))  # no queueing behind a concurrency cap
    self.url = url
    self.http = None  # one client for all calls: creating one per call costs an SSL context

  async def run(self, arguments, context):
    if self.name == "timeout":  # an upstream that never answers, cut by the tool's own timeout
      async with asyncio.timeout(0.1):
        await asyncio.sleep(30)
    if self.name == "exception":
      raise RuntimeError("the tool crashed")
    if self.name == "http_5xx":
      self.http = self.http or httpx.AsyncClient()
      response = await self.http.get(self.url)
      raise ToolError(f"HTTP {response.status_code}: {response.text}")
    return ToolResult(text="x" * 1_000_000)  # huge_output


class FaultEpisode(Episode):
  def __init__(self, task, tools):
    super().__init__(task)
    self.tools = tools

  def messages(self):
    return [{"role": "user", "content": self.task.prompt}]

  def tool_schemas(self):
    return [t.schema() for t in self.tools.values()] + [
        {"type": "function", "function": {"name": "answer", "parameters": {"type": "object"}}}]

  async def execute(self, call, context):
    if call.name == "answer":
      self.done = True
      return ToolResult(text="ok")
    return await self.tools[call.name].call(call.arguments, context)

  def score(self):
    return float(self.done)


class FaultEnv(Environment):
  def __init__(self, url):
    self.tools = {name: FaultTool(name, url) for name in FAULTS[:4]}

  def tasks(self, split="train"):
    return [Task(f"task-{i:04d}", FAULTS[i % len(FAULTS)]) for i in range(EPISODES)]

  def start(self, task):
    return FaultEpisode(task, self.tools)


def script(messages, tools):
  """First turn: trigger the task's fault; second turn: answer."""
  fault = messages[0]["content"]
  if messages[-1]["role"] != "user":
    return {"role": "assistant", "content": '<tool_call>\n{"name": "answer", "arguments": {}}\n</tool_call>'}
  if fault == "malformed":
    return {"role": "assistant", "content": '<tool_call>\n{"name": "timeout", "arguments": \n</tool_call>'}
  return {"role": "assistant", "content": f'<tool_call>\n{{"name": "{fault}", "arguments": {{}}}}\n</tool_call>'}


def test_thousand_episodes_with_faults_none_lost_all_counted(failing_url):
  tokenizer = load_tokenizer(data_path("qwen3"))
  env = FaultEnv(failing_url)
  config = EpisodeConfig(tool_timeout_s=60.0, concurrency=250, max_observation_chars=4096)
  trajectories = asyncio.run(run_groups(env, ScriptedPolicy(tokenizer, script), env.tasks(), 1,
                                        tokenizer, config))
  assert len(trajectories) == EPISODES
  assert sorted(t.task_id for t in trajectories) == [t.task_id for t in env.tasks()]  # none lost
  assert all(t.finish == "env" and t.outcome == 1.0 for t in trajectories)  # none crashed

  totals = collections.Counter()
  for t in trajectories:
    totals.update(t.faults)
    fault = FAULTS[int(t.task_id.split("-")[1]) % len(FAULTS)]
    first = t.turns[0].observations[0]
    expected = {"timeout": "Error: TimeoutError", "exception": "Error: RuntimeError: the tool crashed",
                "http_5xx": "Error: HTTP 503: upstream unavailable", "huge_output": "xxxx",
                "malformed": "Error: tool call is not valid JSON"}[fault]
    assert first.startswith(expected), (fault, first[:80])
    if fault == "huge_output":
      assert len(first) < 4200 and "[truncated: 1000000 characters in all]" in first
  per_kind = EPISODES // len(FAULTS)
  print("FAULTS", dict(totals))
  assert totals == {"tool_error": 3 * per_kind, "observation_truncated": per_kind,
                    "parse_malformed_json": per_kind}
