"""LLM mode against a real OpenAI-compatible HTTP server on 127.0.0.1 that replays recorded
answers per stage: malformed JSON, a schema violation, an inconsistent entry and a tool that fails
its smoke test are each repaired by a retry with the error, or dropped and counted."""

import http.server
import json
import re
import threading

import pytest

from data_synth.llm import LLMSource
from data_synth.pipeline import SynthConfig, synthesize
from toolorch_jax.config import ConfigError
from toolorch_jax.envs.tau2 import scoring
from toolorch_jax.envs.tau2.env import Settings, Tau2Environment
from toolorch_jax.tools.http_retry import RetryPolicy

TABLES = {
    "notebooks": {"key": "notebook_id", "id_prefix": "NB", "fields": {
        "notebook_id": {"type": "string"}, "owner": {"type": "string"}}},
    "notes": {"key": "note_id", "id_prefix": "N", "fields": {
        "note_id": {"type": "string"}, "notebook_id": {"type": "string", "ref": "notebooks"},
        "stars": {"type": "integer"}}},
}
GET_NOTE = {"name": "get_note", "description": "Look up a note.",
            "parameters": {"note_id": {"type": "string", "description": "The note id."}},
            "load": [{"as": "note", "table": "notes", "key": "args.note_id"}],
            "example": {"note_id": "N0001"}}
STAR = {"name": "star_note", "description": "One more star.",
        "parameters": {"note_id": {"type": "string", "description": "The note id."}},
        "load": [{"as": "note", "table": "notes", "key": "args.note_id"}],
        "update": [{"row": "note", "set": {"stars": "note.stars + 1"}}],
        "example": {"note_id": "N0002"}}
BROKEN = {"name": "reset_notebook", "description": "Fails its smoke test: no such notebook.",
          "parameters": {"notebook_id": {"type": "string", "description": "The notebook id."}},
          "load": [{"as": "book", "table": "notebooks", "key": "args.notebook_id"}],
          "example": {"notebook_id": "NB0404"}}


def task(ticket, calls, say):
  return {"ticket": ticket, "communicate_info": say,
          "actions": [{"name": n, "arguments": {"note_id": i}} for n, i in calls]}


ANSWERS = {
    "schema": ["{'tables': oops", json.dumps(TABLES)],  # malformed JSON, then repaired
    "entries": [
        json.dumps([{"notebook_id": "NB0001", "owner": "Ada"}, {"notebook_id": "NB0002", "owner": "Bo"}]),
        "```json\n" + json.dumps([
            {"note_id": "N0001", "notebook_id": "NB0001", "stars": 2},
            {"note_id": "N0002", "notebook_id": "NB0002", "stars": 0},
            {"note_id": "N0003", "notebook_id": "NB0009", "stars": 1},  # inconsistent: no NB0009
        ]) + "\n```"],
    "tools": [json.dumps([{**GET_NOTE, "description": 7}]),  # schema violation, then repaired
              json.dumps([GET_NOTE, STAR, BROKEN])],  # BROKEN fails its smoke test: dropped
    # With one request in flight, the 6 intents are asked in order, then the 2 repairs.
    "tasks": [json.dumps(task("Star note N0001.", [("star_note", "N0001")], [])),
              json.dumps(task("Star N0404.", [("star_note", "N0404")], [])),  # gold raises
              json.dumps(task("Star note N0002 and tell me its stars.",
                              [("star_note", "N0002"), ("get_note", "N0002")], ["1"])),
              json.dumps(task("Star note N0001 please.", [("star_note", "N0001")], [])),  # dup
              "not json at all",
              json.dumps(task("Look at N0002.", [("get_note", "N0002")], [])),  # no-op succeeds
              "still not json",  # the repair of the raising task: dropped
              json.dumps(task("How many stars has N0002?", [("get_note", "N0002")], ["0"]))],
}
DESCRIPTION = """
domain: notes
title: the notes service
clock: "2025-01-10T12:00:00"
rules: [Notes get stars.]
tables:
  notebooks: {key: notebook_id, id_prefix: NB, rows: 2, fields: {notebook_id: {type: string}}}
tools: []
"""


class Replay(http.server.BaseHTTPRequestHandler):
  answers: dict = {}
  seen: list = []

  def do_POST(self):  # noqa: N802 (http.server's naming)
    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
    stage = re.search(r"Stage: (\w+)", body["messages"][0]["content"]).group(1)
    self.seen.append((stage, len(body["messages"])))
    queue = self.answers.get(stage) or []
    text = queue.pop(0) if queue else "[]"
    reply = {"choices": [{"message": {"role": "assistant", "content": text},
                          "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 100, "completion_tokens": 10}}
    data = json.dumps(reply).encode()
    self.send_response(200)
    self.send_header("Content-Type", "application/json")
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)

  def log_message(self, *args):
    pass


@pytest.fixture
def server():
  Replay.answers = {k: list(v) for k, v in ANSWERS.items()}
  Replay.seen = []
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replay)
  threading.Thread(target=httpd.serve_forever, daemon=True).start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
  httpd.shutdown()


def _config(tmp_path, url, tasks=5):
  path = tmp_path / "notes.yaml"
  path.write_text(DESCRIPTION)
  source = LLMSource.from_args(url, "recorded", concurrency=1, price_in=1.0, price_out=2.0,
                               retry=RetryPolicy(max_attempts=1, timeout_s=10))
  return SynthConfig(out=tmp_path / "out", tasks=tasks, domains=(str(path),), progress=False,
                     llm=source)


def test_llm_mode_repairs_or_drops_and_counts(tmp_path, server):
  stats = synthesize(_config(tmp_path, server))  # 5 tasks wanted: 6 intents asked for
  usage = {u["stage"]: u for u in stats["usage"]}
  assert (usage["environment:schema"]["repairs"], usage["environment:schema"]["dropped"]) == (1, 0)  # malformed JSON
  assert usage["environment:entries"]["dropped"] == 1  # the note in a notebook that does not exist
  assert (usage["environment:tools"]["repairs"], usage["environment:tools"]["dropped"]) == (1, 1)  # schema; smoke test
  assert usage["tasks"]["repairs"] == 2 and usage["tasks"]["dropped"] == 1  # gold raised, not JSON
  assert usage["tasks"]["calls"] == 8 and usage["environment:schema"]["input_tokens"] == 200
  assert usage["environment:schema"]["cost_usd"] == pytest.approx(2 * (100e-6 + 20e-6))
  (row,) = stats["domains"]
  assert row["dropped"]["duplicate_actions"] == 1 and row["dropped"]["noop_succeeds"] == 1
  assert row["tasks"] == 3 and row["tools"] == 2 and row["entries"] == 4
  folder = tmp_path / "out" / "notes"
  env = Tau2Environment(Settings(domain=str(folder), split="base"))
  for t in env.tasks():
    spec = t.answer
    gold = [(a.name, a.arguments) for a in spec.criteria.actions]
    said = ["\n".join(spec.criteria.communicate_info)]
    assert scoring.score(env.domain, spec, env.initial_db(spec), gold, said, True)[0] == 1.0


def test_no_valid_schema_writes_nothing(tmp_path, server):
  Replay.answers["schema"] = ["nope", "still nope"]
  with pytest.raises(ConfigError, match="no valid schema from the LLM; nothing written"):
    synthesize(_config(tmp_path, server))
  assert not (tmp_path / "out" / "notes").exists()


def test_a_rerun_reuses_the_answers_already_paid_for(tmp_path, server):
  config = _config(tmp_path, server)
  asked = sum(u["calls"] for u in synthesize(config)["usage"])
  tasks = (tmp_path / "out" / "notes" / "tasks.json").read_bytes()
  for stage in (tmp_path / "out" / ".cache" / "notes").glob("*.json"):
    stage.unlink()  # as if the run had stopped before any stage was stored
  Replay.answers, Replay.seen = {}, []
  stats = synthesize(config)
  assert Replay.seen == []  # not one request: every answer came from the answer store
  assert sum(u["calls"] for u in stats["usage"]) == 0
  assert sum(u["reused"] for u in stats["usage"]) == asked == 14
  assert all(u["cached"] for u in synthesize(config)["usage"])  # a third run: every stage stored
  assert (tmp_path / "out" / "notes" / "tasks.json").read_bytes() == tasks
