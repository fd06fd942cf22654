"""A real HTTP server on 127.0.0.1 for tests that talk to a service: a free port, a thread per
request, serving while the `with` block runs."""

from __future__ import annotations

import contextlib
import http.server
import threading
from typing import Iterator


class QuietHandler(http.server.BaseHTTPRequestHandler):
  """Keep-alive connections as real servers answer them, and no request log in the test output."""

  protocol_version = "HTTP/1.1"

  def log_message(self, *args):
    pass


@contextlib.contextmanager
def serve_http(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
  """Serves `handler` on a free loopback port; yields the base URL (http://127.0.0.1:PORT)."""
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
  finally:
    httpd.shutdown()
    httpd.server_close()
