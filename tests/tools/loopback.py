"""Real HTTP servers on 127.0.0.1 for the tool tests: each request gets the next scripted reply.

A reply is one of
  ("json", status, body[, headers])  a JSON body
  ("raw", status, text)              a body that is not JSON
  ("slow", seconds, reply)           wait, then answer (the client has usually given up)
  ("drop",)                          close the connection without answering
or a callable taking the request (a `Seen`) and returning one of those. The last reply repeats.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from typing import Any, Callable, Iterator

from tests.http_loopback import QuietHandler, serve_http


@dataclasses.dataclass
class Seen:
  path: str
  headers: dict[str, str]
  body: Any


@dataclasses.dataclass
class Server:
  url: str
  requests: list[Seen]
  max_in_flight: int = 0


def completion(text: str, prompt_tokens: int, completion_tokens: int, model: str = "m") -> dict:
  """An OpenAI chat-completion body."""
  return {"id": "chatcmpl-1", "object": "chat.completion", "model": model,
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": text}}],
          "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens}}


@contextlib.contextmanager
def serve(script: list[tuple | Callable[[Seen], tuple]]) -> Iterator[Server]:
  lock = threading.Lock()
  state = {"next": 0, "in_flight": 0}
  server_info = Server("", [])

  class Handler(QuietHandler):
    def do_POST(self):
      raw = self.rfile.read(int(self.headers.get("content-length", 0)))
      body = json.loads(raw) if raw else None
      seen = Seen(self.path, dict(self.headers), body)
      with lock:
        server_info.requests.append(seen)
        reply = script[min(state["next"], len(script) - 1)]
        state["next"] += 1
        state["in_flight"] += 1
        server_info.max_in_flight = max(server_info.max_in_flight, state["in_flight"])
      try:
        self._answer(reply(seen) if callable(reply) else reply)
      except (BrokenPipeError, ConnectionResetError):  # the client gave up on a slow reply
        pass
      finally:
        with lock:
          state["in_flight"] -= 1

    def _answer(self, reply: tuple) -> None:
      kind = reply[0]
      if kind == "slow":
        time.sleep(reply[1])
        return self._answer(reply[2])
      if kind == "drop":
        self.close_connection = True
        return
      status, payload = reply[1], reply[2]
      data = (json.dumps(payload) if kind == "json" else payload).encode()
      self.send_response(status)
      self.send_header("content-type", "application/json")
      self.send_header("content-length", str(len(data)))
      for name, value in (reply[3] if len(reply) > 3 else {}).items():
        self.send_header(name, value)
      self.end_headers()
      self.wfile.write(data)

  with serve_http(Handler) as server_info.url:
    yield server_info
