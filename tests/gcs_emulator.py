"""gcp-storage-emulator for the gs:// tests, in its own process: `python tests/gcs_emulator.py`
serves an in-memory bucket `bucket` on a free loopback port and prints the port.

Its own server listens with socketserver's backlog of 5 connections, one request at a time:
tensorstore opens dozens of connections at once, the kernel drops the connection requests past
the backlog, and each dropped client waits out TCP's retransmit backoff (1 s, 3 s, 7 s, ...), so a
2-process checkpoint crawled. Here the backlog holds them all."""

import functools
import http.server

from gcp_storage_emulator.handlers.buckets import create_bucket
from gcp_storage_emulator.server import RequestHandler
from gcp_storage_emulator.storage import Storage


class BackloggedServer(http.server.HTTPServer):
  request_queue_size = 1024


def main() -> None:
  storage = Storage(use_memory_fs=True)
  create_bucket("bucket", storage)
  server = BackloggedServer(("127.0.0.1", 0), functools.partial(RequestHandler, storage))
  print(server.server_address[1], flush=True)
  server.serve_forever()


if __name__ == "__main__":
  main()
