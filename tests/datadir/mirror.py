"""A loopback mirror of the data's public sources, served from the data bundle: git files at
/OWNER/REPO/COMMIT/PATH (with Range requests, as raw-file hosts answer them) and a package index
at /simple/ whose wheel holds the package files at their in-wheel paths.

The wheel is built here from the bundle. Its telecom tasks.json is a "full" file: the bundle's
filtered tasks with other tasks between them, so the download has to apply the manifest's filter
to get the bundle's bytes back. Faults per path: `corrupt` (one byte changed) and `drops` (that
many responses cut off halfway through the body)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import threading
import zipfile
from pathlib import Path
from typing import Iterator

from tests.http_loopback import QuietHandler, serve_http
from toolorch_jax.datadir.manifest import DataFile, GitSource, PackageSource


@dataclasses.dataclass
class Mirror:
  url: str
  requests: list[tuple[str, str]]  # (path, Range header or "")
  corrupt: set[str] = dataclasses.field(default_factory=set)  # URL paths served with a bad byte
  drops: dict[str, int] = dataclasses.field(default_factory=dict)  # URL path -> responses to cut

  @property
  def index_url(self) -> str:
    return self.url + "/simple/"


def _full_tasks(filtered: bytes) -> bytes:
  """The filtered task list with an extra task after each one, laid out as the source is."""
  tasks = []
  for i, task in enumerate(json.loads(filtered)):
    tasks += [task, {**task, "id": f"[extra]{i}"}]
  return json.dumps(tasks, indent=2).encode()


def build_wheel(files: list[DataFile], bundle: Path) -> tuple[str, bytes]:
  """(file name, bytes) of a wheel holding the package files of `files`."""
  package = next(f.source for f in files if isinstance(f.source, PackageSource))
  dist = f"{package.package.replace('-', '_')}-{package.version}"
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
    for entry in files:
      if isinstance(entry.source, PackageSource):
        data = (bundle / entry.path).read_bytes()
        wheel.writestr(entry.source.member, _full_tasks(data) if entry.filter else data)
    wheel.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {package.package}\n"
                   f"Version: {package.version}\n")
    wheel.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
    wheel.writestr(f"{dist}.dist-info/RECORD", "")
  return f"{dist}-py3-none-any.whl", out.getvalue()


@contextlib.contextmanager
def serve_mirror(files: list[DataFile], bundle: Path) -> Iterator[Mirror]:
  routes: dict[str, bytes | Path] = {}
  for entry in files:
    if isinstance(entry.source, GitSource):
      routes["/" + entry.source.url("").lstrip("/")] = bundle / entry.path
  if any(isinstance(f.source, PackageSource) for f in files):
    name, wheel = build_wheel(files, bundle)
    project = next(f.source.package for f in files if isinstance(f.source, PackageSource))
    routes[f"/wheels/{name}"] = wheel
    routes[f"/simple/{project}/"] = (f'<html><body><a href="/wheels/{name}">{name}</a>'
                                     "</body></html>").encode()
  mirror = Mirror("", [])
  lock = threading.Lock()

  class Handler(QuietHandler):
    def do_GET(self):
      path = self.path.split("?")[0]
      with lock:
        mirror.requests.append((path, self.headers.get("Range", "")))
        cut = mirror.drops.get(path, 0) > 0
        if cut:
          mirror.drops[path] -= 1
      body = routes.get(path)
      if body is None:
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()
        return
      data = body.read_bytes() if isinstance(body, Path) else body
      if path in mirror.corrupt:
        data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
      start = 0
      if ranged := self.headers.get("Range"):
        start = int(ranged.removeprefix("bytes=").split("-")[0])
        if start >= len(data):
          self.send_response(416)
          self.send_header("content-length", "0")
          self.end_headers()
          return
      self.send_response(206 if start else 200)
      if path.startswith("/simple/"):
        self.send_header("content-type", "text/html")
      if start:
        self.send_header("content-range", f"bytes {start}-{len(data) - 1}/{len(data)}")
      self.send_header("content-length", str(len(data) - start))
      self.end_headers()
      if cut:  # half the body, then the connection goes away
        self.wfile.write(data[start:start + (len(data) - start) // 2])
        self.wfile.flush()
        self.close_connection = True
        return
      self.wfile.write(data[start:])

  with serve_http(Handler) as mirror.url:
    yield mirror
