"""Runs untrusted Python in a throwaway directory, isolated as far as this machine allows.

Isolation levels, strongest first; `auto` takes the first that works here (probed once):

  namespaces  util-linux `unshare`: new network (no interfaces up), mount, PID, IPC and UTS
              namespaces; a private read-only root holding only /usr, a few /etc files, the
              interpreter and /sandbox; as root the code also runs as a fresh unprivileged uid,
              otherwise inside a user namespace mapped to the caller
  bwrap       bubblewrap with the same layout, for machines that allow it but not `unshare`
  none        resource limits, a process group, a clean environment and a temp directory only;
              refused unless the config sets `allow_unisolated: true`

Every level sets CPU-time, address-space, process-count, file-size and open-file limits, kills
the whole process group at the wall-clock timeout, and keeps the head and tail of each output
stream up to a byte limit. With a PID namespace, a process the code leaves behind (even one that
called setsid) dies with the sandbox's first process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from toolorch_jax.config import ConfigError

LEVELS = ("namespaces", "bwrap", "none")
INIT_SOURCE = (Path(__file__).parent / "sandbox_init.py").read_text()
SETUP_FAILED = 125
SETUP_MARK = "toolorch-sandbox:"
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
             "nsswitch.conf", "alternatives")
TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NAMESPACE_FLAGS = ("--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child")
BWRAP_FLAGS = ("--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
               "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session")
BWRAP_UID = 65534
WORKDIR = "/sandbox"


@dataclasses.dataclass
class SandboxConfig:
  """Isolation and limits of one code run (the `code_interpreter` tool's settings)."""

  isolation: str = "auto"         # auto | namespaces | bwrap | none
  allow_unisolated: bool = False  # let `auto` fall back to (or `isolation` name) level none
  timeout_s: float = 10.0         # wall clock; then the whole process group is killed
  cpu_s: int = 10                 # CPU seconds per process (SIGXCPU, then SIGKILL)
  memory_mb: int = 1024           # address space per process
  max_processes: int = 32
  max_file_mb: int = 16           # largest file the code may write
  max_open_files: int = 256
  max_output_bytes: int = 16384   # per stream; the head and the tail are kept
  python: str = ""                # interpreter to run the code; "" = the one running toolorch
  ro_paths: list[str] = dataclasses.field(default_factory=list)  # more host paths, read-only
  env: dict[str, str] = dataclasses.field(default_factory=dict)  # more environment variables

  def __post_init__(self):
    if self.isolation not in ("auto",) + LEVELS:
      raise ConfigError(f"isolation must be one of auto, {', '.join(LEVELS)};"
                        f" got '{self.isolation}'")
    if self.isolation == "none" and not self.allow_unisolated:
      raise ConfigError("isolation: none runs code without isolation; it needs"
                        " allow_unisolated: true")
    for name in ("timeout_s", "cpu_s", "memory_mb", "max_processes", "max_file_mb",
                 "max_open_files", "max_output_bytes"):
      if getattr(self, name) <= 0:
        raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclasses.dataclass
class SandboxRun:
  """How a run ended and what it printed (each stream already cut to the byte limit)."""

  stdout: str
  stderr: str
  exit_code: int | None       # None when killed at the timeout
  timed_out: bool
  wall_s: float
  isolation: str
  stdout_bytes: int           # before truncation
  stderr_bytes: int
  uid: int                    # the uid the code ran as, seen from the host

  @property
  def setup_error(self) -> str | None:
    """The sandbox's own failure (not the code's), if it could not start the code."""
    if self.exit_code == SETUP_FAILED and SETUP_MARK in self.stderr:
      return self.stderr[self.stderr.index(SETUP_MARK) + len(SETUP_MARK):].strip()
    return None

  @property
  def signal(self) -> int | None:
    return self.exit_code - 128 if self.exit_code is not None and self.exit_code > 128 else None

  def metadata(self) -> dict:
    return {"isolation": self.isolation, "exit_code": self.exit_code, "timed_out": self.timed_out,
            "wall_s": round(self.wall_s, 4), "stdout_bytes": self.stdout_bytes,
            "stderr_bytes": self.stderr_bytes, "uid": self.uid}


class SandboxUnavailable(RuntimeError):
  """The requested isolation cannot be had here (the reason says why and what to change)."""


@dataclasses.dataclass(frozen=True)
class Interpreter:
  executable: str
  paths: tuple[str, ...]  # host directories it needs, bound read-only into the sandbox


@functools.lru_cache(maxsize=None)
def interpreter(python: str = "") -> Interpreter:
  """The interpreter and its prefixes (a venv's and its base's), asked of the interpreter itself."""
  executable = os.path.abspath(shutil.which(python) or python) if python else sys.executable
  query = "import sys, json; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix]))"
  try:
    out = subprocess.run([executable, "-I", "-c", query], capture_output=True, text=True,
                         timeout=30, check=True).stdout
  except (OSError, subprocess.SubprocessError) as err:
    raise ConfigError(f"python: cannot run interpreter '{executable}': {err}") from None
  paths = json.loads(out) + [os.path.dirname(os.path.realpath(executable))]
  return Interpreter(executable, tuple(dict.fromkeys(paths)))


def _outermost(paths: Sequence[str], covered: Sequence[str]) -> list[str]:
  """`paths` minus those inside another kept path or inside `covered`."""
  kept: list[str] = []
  for path in sorted({os.path.realpath(p) for p in paths}, key=len):
    if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in [*covered, *kept]):
      kept.append(path)
  return kept


def mount_plan(work: str, tmp: str, ro_paths: Sequence[str]) -> list[tuple[str, str, str]]:
  """The sandbox's filesystem as (kind, source, target): system dirs and `ro_paths` read-only,
  fresh /dev and /proc, the work directory at /sandbox and a private /tmp."""
  plan = [("ro", "/usr", "/usr")]
  for top in TOP_DIRS:
    if os.path.islink(top):
      plan.append(("symlink", os.readlink(top), top))
    elif os.path.isdir(top):
      plan.append(("ro", top, top))
  plan += [("ro", f"/etc/{name}", f"/etc/{name}") for name in ETC_FILES
           if os.path.exists(f"/etc/{name}")]
  plan += [("ro", path, path) for path in _outermost(ro_paths, ["/usr", *TOP_DIRS])
           if os.path.exists(path)]
  return plan + [("dev", "", "/dev"), ("proc", "", "/proc"), ("rw", work, WORKDIR),
                 ("rw", tmp, "/tmp")]


def _bwrap_args(plan: Sequence[tuple[str, str, str]]) -> list[str]:
  option = {"ro": "--ro-bind", "rw": "--bind", "symlink": "--symlink"}
  args = [*BWRAP_FLAGS, "--uid", str(BWRAP_UID), "--gid", str(BWRAP_UID)]
  for kind, src, dst in plan:
    args += [f"--{kind}", dst] if kind in ("dev", "proc") else [option[kind], src, dst]
  return args + ["--remount-ro", "/", "--chdir", WORKDIR]


class _Workspace:
  """A fresh temp directory: `work/` (the code's directory), `tmp/` (its /tmp), `root/` (where the
  namespaces level builds its root); removed with everything the code wrote."""

  def __init__(self, code: str, uid: int | None):
    self.dir = tempfile.mkdtemp(prefix="toolorch-sandbox-")
    self.work, self.tmp, self.root = (os.path.join(self.dir, d) for d in ("work", "tmp", "root"))
    for path in (self.work, self.tmp, self.root):
      os.mkdir(path, 0o700)
    Path(self.work, "main.py").write_text(code)
    if uid is not None:
      for path in (self.work, self.tmp, os.path.join(self.work, "main.py")):
        os.chown(path, uid, uid)

  def __enter__(self) -> "_Workspace":
    return self

  def __exit__(self, *exc) -> None:
    shutil.rmtree(self.dir, ignore_errors=True)


def _rlimits(config: SandboxConfig) -> dict[str, list[int]]:
  mib = 1 << 20
  return {"CPU": [config.cpu_s, config.cpu_s + 1], "AS": [config.memory_mb * mib] * 2,
          "NPROC": [config.max_processes] * 2, "FSIZE": [config.max_file_mb * mib] * 2,
          "NOFILE": [config.max_open_files] * 2, "CORE": [0, 0]}


def _environment(config: SandboxConfig, interp: Interpreter, home: str, tmp: str) -> dict[str, str]:
  """Only what Python needs: nothing of the caller's environment (API keys) gets in."""
  dirs = [os.path.dirname(interp.executable), "/usr/local/bin", "/usr/bin", "/bin"]
  path = ":".join(dict.fromkeys(dirs))
  env = {"PATH": path, "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
         "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
  return env | dict(config.env)


def _init(config: dict) -> list[str]:
  return ["-I", "-S", "-c", INIT_SOURCE, json.dumps(config)]


def _command(level: str, ws: _Workspace, uid: int | None, config: SandboxConfig,
             interp: Interpreter) -> tuple[list[str], dict[str, str]]:
  """The argv and environment that start the code at `level`."""
  py = interp.executable
  inner = {"argv": [py, "-B", "-E", "-s", "-u", "main.py"], "rlimits": _rlimits(config)}
  if level == "none":
    launch = {**inner, "cwd": ws.work}
    return [py, *_init(launch | {"pdeathsig": True, "ppid": os.getpid()})], \
        _environment(config, interp, ws.work, ws.tmp)
  plan = mount_plan(ws.work, ws.tmp, [*interp.paths, *config.ro_paths])
  if level == "namespaces":
    inner |= {"root": ws.root, "mounts": plan, "cwd": WORKDIR, "uid": uid, "gid": uid}
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    exe = [shutil.which("unshare") or "unshare", *user, *NAMESPACE_FLAGS, "--"]
  else:
    inner |= {"cwd": WORKDIR}
    exe = [shutil.which("bwrap") or "bwrap", *_bwrap_args(plan), "--"]
  launcher = {"pdeathsig": True, "ppid": os.getpid(), "exec": [*exe, py, *_init(inner)]}
  return [py, *_init(launcher)], _environment(config, interp, WORKDIR, "/tmp")


def _sandbox_uid(level: str) -> int | None:
  """As root at the namespaces level the code runs as a fresh uid nobody else uses: its process
  limit is its own, and it can signal or read nothing of another run's."""
  if level == "namespaces" and os.geteuid() == 0:
    return (1 << 30) + secrets.randbelow(1 << 30)
  return None


class _Capture:
  """Keeps the first and the last half of `limit` bytes of a stream and counts the rest: a flood
  costs no memory, and a traceback at the end survives."""

  def __init__(self, limit: int):
    self.head_limit, self.tail_limit = limit // 2, limit - limit // 2
    self.head, self.tail = bytearray(), bytearray()
    self.total = 0

  def feed(self, chunk: bytes) -> None:
    self.total += len(chunk)
    room = self.head_limit - len(self.head)
    if room > 0:
      self.head += chunk[:room]
      chunk = chunk[room:]
    self.tail += chunk
    del self.tail[:-self.tail_limit]

  def text(self) -> str:
    dropped = self.total - len(self.head) - len(self.tail)
    marker = f"\n[... {dropped} bytes truncated ...]\n".encode() if dropped else b""
    return bytes(self.head + marker + self.tail).decode("utf-8", errors="replace")


class _Collector(asyncio.SubprocessProtocol):
  """Output and exit of the sandbox's first process. Unlike `asyncio.subprocess.Process.wait`
  (which, in 3.11, also waits for the pipes to close), `exited` fires when the process exits, even
  if a process it left behind still holds its stdout."""

  def __init__(self, limit: int):
    loop = asyncio.get_running_loop()
    self.streams = {1: _Capture(limit), 2: _Capture(limit)}
    self.exited, self.closed = loop.create_future(), loop.create_future()

  def pipe_data_received(self, fd: int, data: bytes) -> None:
    self.streams[fd].feed(data)

  def process_exited(self) -> None:
    self.exited.set_result(None)

  def connection_lost(self, exc: Exception | None) -> None:
    self.closed.set_result(None)


def _kill_group(pgid: int) -> None:
  try:
    os.killpg(pgid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


async def _execute(argv: list[str], env: dict[str, str], config: SandboxConfig, level: str,
                   uid: int) -> SandboxRun:
  start = time.monotonic()
  transport, collector = await asyncio.get_running_loop().subprocess_exec(
      lambda: _Collector(config.max_output_bytes), *argv, stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
  timed_out = False
  try:
    try:
      await asyncio.wait_for(asyncio.shield(collector.exited), config.timeout_s)
    except TimeoutError:
      timed_out = True
    wall_s = time.monotonic() - start
  finally:
    _kill_group(transport.get_pid())  # leftovers of the group, or everything at the timeout
    await collector.exited
    # At level none a process that left the group may hold the pipes; do not wait for it.
    await asyncio.wait([collector.closed], timeout=1.0)
    transport.close()
  out, err = collector.streams[1], collector.streams[2]
  return SandboxRun(out.text(), err.text(), None if timed_out else transport.get_returncode(),
                    timed_out, wall_s, level, out.total, err.total, uid)


@functools.lru_cache(maxsize=None)
def probe(level: str, python: str = "") -> str | None:
  """None when `level` works on this machine, else why not (the first line of the failure)."""
  tool = {"namespaces": "unshare", "bwrap": "bwrap"}.get(level)
  if tool and shutil.which(tool) is None:
    return f"{tool} not found on PATH"
  interp = interpreter(python)
  config = SandboxConfig(timeout_s=30, allow_unisolated=True)
  uid = _sandbox_uid(level)
  with _Workspace("print('ok')", uid) as ws:
    argv, env = _command(level, ws, uid, config, interp)
    try:
      done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30,
                            start_new_session=True)
    except subprocess.TimeoutExpired:
      return "probe timed out"
  if done.returncode == 0 and done.stdout == "ok\n":
    return None
  lines = (done.stderr or done.stdout).strip().splitlines()
  return lines[-1] if lines else f"probe exited with status {done.returncode}"


def choose_level(config: SandboxConfig) -> str:
  """The isolation level a run gets under `config`, or SandboxUnavailable saying why none."""
  if config.isolation == "none":
    return "none"
  if config.isolation != "auto":
    reason = probe(config.isolation, config.python)
    if reason:
      raise SandboxUnavailable(f"isolation '{config.isolation}' is not available here: {reason}")
    return config.isolation
  reasons = {}
  for level in ("namespaces", "bwrap"):
    reasons[level] = probe(level, config.python)
    if reasons[level] is None:
      return level
  if config.allow_unisolated:
    return "none"
  tried = "; ".join(f"{level}: {why}" for level, why in reasons.items())
  raise SandboxUnavailable(f"no sandbox isolation available on this machine ({tried}); refusing to"
                           " run code unisolated (set allow_unisolated: true to allow it)")


async def run_python(code: str, config: SandboxConfig) -> SandboxRun:
  """Runs `code` as main.py in a fresh sandbox; raises SandboxUnavailable, never for the code."""
  interp = await asyncio.to_thread(interpreter, config.python)
  level = await asyncio.to_thread(choose_level, config)
  uid = _sandbox_uid(level)
  with _Workspace(code, uid) as ws:
    argv, env = _command(level, ws, uid, config, interp)
    return await _execute(argv, env, config, level, os.geteuid() if uid is None else uid)
