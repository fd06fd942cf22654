"""gcp-storage-emulator for the gs:// tests, in its own process: `python tests/gcs_emulator.py`
serves an in-memory bucket `bucket` on a free loopback port and prints the port.

The emulator's own server listens with socketserver's backlog of 5 connections and answers one
request at a time; tensorstore opens dozens of connections at once, and the kernel drops those
past the backlog (measured: its ListenOverflows counter rose by 3-4 per save of 100 arrays; 0 with
this server), leaving each dropped client to TCP's retransmit backoff. Here the backlog holds
them all."""

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
