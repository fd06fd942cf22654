"""gcp-storage-emulator for the gs:// tests, in its own process: `python tests/gcs_emulator.py`
serves an in-memory bucket `bucket` on a free loopback port and prints the port.

Two gaps of the emulator that tensorstore runs into, filled here:
- downloads carry no `x-goog-generation` header, which GCS sends and tensorstore reads to know the
  generation of what it read; OCDBT's read-modify-write of its manifest then failed with
  "Malformed StorageGeneration" (a save of 100 arrays: 3 of 4 runs failed without the header, 0 of
  4 with it);
- its server listens with socketserver's backlog of 5 connections and answers one request at a
  time; tensorstore opens dozens of connections at once, and the kernel drops those past the
  backlog (its ListenOverflows counter rose by 3-4 per such save; 0 here), leaving each dropped
  client to TCP's retransmit backoff."""

import functools
import http.server

from gcp_storage_emulator.handlers import objects

_download = objects.download


def download_with_generation(request, response, storage, *args, **kwargs):
  _download(request, response, storage, *args, **kwargs)
  if response.status in (200, 206):
    obj = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
    response["x-goog-generation"] = obj["generation"]
    response["x-goog-metageneration"] = obj["metageneration"]


objects.download = download_with_generation  # before the server's routing table is built

from gcp_storage_emulator.handlers.buckets import create_bucket  # noqa: E402
from gcp_storage_emulator.server import RequestHandler  # noqa: E402
from gcp_storage_emulator.storage import Storage  # noqa: E402


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
