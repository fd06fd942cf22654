"""The code sandbox under attack, at every isolation level this machine has.

Each attack must be contained: it ends as an error result or as a clean result that shows the
attack failed, and leaves nothing behind on the host. Some containment needs a particular kind
of isolation; `requires` names it and skips, with that reason, at levels that lack it:

  network     a network namespace (namespaces, bwrap): no route to the host's or any address
  filesystem  a private root (namespaces, bwrap): the host's files are not there to read or write
  pid         a PID namespace (namespaces, bwrap): no other process visible, none survives
  nproc       a process limit the kernel enforces: a non-root uid (namespaces drops root to a
              fresh uid; bwrap and none enforce it only when toolorch itself is not root)

Resource limits (memory, CPU, wall clock, output size) and the scrubbed environment hold at
every level, `none` included.
"""

import asyncio
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

import toolorch_jax
from toolorch_jax.config import ConfigError
from toolorch_jax.tools import Price
from toolorch_jax.tools.code_interpreter import CodeInterpreter
from toolorch_jax.tools.sandbox import LEVELS, SandboxConfig, probe

ROOT = os.geteuid() == 0
PROVIDES = {
    "namespaces": {"network", "filesystem", "pid", "nproc"},
    "bwrap": {"network", "filesystem", "pid"} | (set() if ROOT else {"nproc"}),
    "none": set() if ROOT else {"nproc"},
}
CHECKOUT = Path(toolorch_jax.__file__).resolve().parents[1]


@pytest.fixture(params=LEVELS)
def level(request):
  reason = probe(request.param)
  if reason:
    pytest.skip(f"isolation level '{request.param}' is not available on this machine: {reason}")
  return request.param


def requires(level, capability):
  if capability not in PROVIDES[level]:
    gives = ", ".join(sorted(PROVIDES[level])) or "limits only"
    pytest.skip(f"containing this needs {capability} isolation, which level '{level}' does not"
                f" give{' to root' if ROOT else ''} (it gives: {gives})")


def run(level, code, **limits):
  config = SandboxConfig(isolation=level, allow_unisolated=True, **limits)
  tool = CodeInterpreter("python", config, price=Price(per_second=0.001))
  result = asyncio.run(tool.call({"code": code}))
  assert result.metadata["isolation"] == level
  return result


def processes_with(marker: str) -> list[int]:
  """Host pids whose command line holds `marker`, waiting a little for killed ones to go."""
  for _ in range(40):
    found = []
    for proc in Path("/proc").iterdir():
      try:
        if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
          found.append(int(proc.name))
      except OSError:
        pass
    if not found:
      return []
    time.sleep(0.05)
  return found


def test_clean_run_reports_output_cost_and_isolation(level):
  result = run(level, "import sys\nprint('hello')\nprint('warn', file=sys.stderr)")
  assert result.ok and result.text == "hello\n[stderr]\nwarn\n"
  assert result.metadata["exit_code"] == 0 and result.cost_usd == pytest.approx(
      0.001 * result.metadata["wall_s"], rel=0.01)


def test_traceback_is_returned(level):
  result = run(level, "def f():\n  return 1 / 0\nf()")
  assert result.error == "exit status 1: ZeroDivisionError: division by zero"
  assert 'line 2, in f' in result.text and "Traceback (most recent call last)" in result.text


@pytest.fixture
def listener():
  """A TCP server on the host's 127.0.0.1 that counts the connections it accepts."""
  server = socket.create_server(("127.0.0.1", 0))
  accepted = []

  def accept():
    while True:
      try:
        conn, _ = server.accept()
      except OSError:
        return
      accepted.append(conn)

  threading.Thread(target=accept, daemon=True).start()
  yield server.getsockname()[1], accepted
  server.close()


CONNECT = """
import socket
try:
  socket.create_connection(({host!r}, {port}), timeout=2).close()
  print("CONNECTED")
except OSError as err:
  print("blocked:", err)
"""


def test_socket_to_host_loopback(level, listener):
  requires(level, "network")
  port, accepted = listener
  result = run(level, CONNECT.format(host="127.0.0.1", port=port))
  assert result.ok and result.text.startswith("blocked:"), result.text
  socket.create_connection(("127.0.0.1", port), timeout=2).close()  # the listener was there
  for _ in range(40):
    if accepted:
      break
    time.sleep(0.05)
  assert len(accepted) == 1  # only our own check got through


def test_socket_to_outside_address(level):
  requires(level, "network")  # never run unisolated: no packet may leave the machine
  result = run(level, CONNECT.format(host="192.0.2.1", port=80))  # TEST-NET-1, documentation only
  assert result.ok and result.text.startswith("blocked:"), result.text


READ = """
for path in {paths!r}:
  try:
    print(path, open(path).read())
  except OSError as err:
    print(path, "unreadable:", type(err).__name__)
"""


def test_reading_a_secret_file(level, tmp_path):
  requires(level, "filesystem")
  token = secrets.token_hex(16)
  secret = tmp_path / "secret.txt"
  secret.write_text(token)
  secret.chmod(0o600)
  result = run(level, READ.format(paths=[str(secret)]))
  assert result.ok and "unreadable: FileNotFoundError" in result.text
  assert token not in result.text


def test_reading_the_checkout(level):
  requires(level, "filesystem")
  paths = [str(CHECKOUT / "README.md"), str(CHECKOUT / "toolorch_jax" / "config.py"),
           str(CHECKOUT / ".git" / "config")]
  result = run(level, READ.format(paths=paths))
  assert result.ok and result.text.count("unreadable: FileNotFoundError") == 3, result.text


def test_writing_outside_its_directory(level, tmp_path):
  requires(level, "filesystem")
  token = secrets.token_hex(8)
  targets = [tmp_path / "escaped.txt", CHECKOUT / f"escaped-{token}", Path(f"/tmp/escaped-{token}"),
             Path(f"/etc/escaped-{token}")]
  code = f"""
import os
for path in {[str(t) for t in targets]!r}:
  try:
    with open(path, "w") as f:
      f.write("x")
    print(path, "written")
  except OSError as err:
    print(path, "refused:", type(err).__name__)
open("inside.txt", "w").write("fine")
print(open("inside.txt").read())
"""
  result = run(level, code)
  assert result.ok and result.text.rstrip().endswith("fine")
  for target in targets:
    assert not target.exists(), f"{target} was written ({result.text})"


FORK_BOMB = """
import os, signal, sys, time
kids = []
while True:  # first count how many processes the limit lets through ...
  try:
    pid = os.fork()
  except OSError:
    break
  if pid == 0:
    time.sleep(60)
    os._exit(0)
  kids.append(pid)
print("forks before refusal:", len(kids), flush=True)
for pid in kids:
  os.kill(pid, signal.SIGKILL)
  os.waitpid(pid, 0)
# ... then fork forever, every process carrying the marker in its command line.
bomb = "import os\\nwhile True:\\n  try:\\n    os.fork()\\n  except OSError:\\n    pass"
os.execv(sys.executable, [sys.executable, "-c", bomb, "{marker}"])
"""


def test_fork_bomb(level):
  requires(level, "nproc")
  marker = f"forkbomb-{secrets.token_hex(6)}"
  result = run(level, FORK_BOMB.format(marker=marker), timeout_s=3, max_processes=16)
  forks = int(result.text.split("forks before refusal:")[1].split()[0])
  assert 0 < forks < 16
  assert result.error and (result.metadata["timed_out"] or "killed by" in result.error)
  assert processes_with(marker) == []


def test_memory_bomb(level):
  result = run(level, "chunks = []\nwhile True:\n  chunks.append(bytearray(64 << 20))",
               memory_mb=512)
  assert result.error == "exit status 1: MemoryError"


def test_busy_loop_hits_the_cpu_limit(level):
  result = run(level, "while True:\n  pass", cpu_s=1, timeout_s=20)
  assert result.error == "killed by SIGXCPU (CPU time limit of 1 s)"


def test_idle_loop_hits_the_wall_clock(level):
  result = run(level, "import time\nprint('started')\nwhile True:\n  time.sleep(1)", timeout_s=1.5)
  assert result.error == "wall-clock timeout after 1.5 s; the process group was killed"
  assert result.text == "started\n"  # what it printed before the kill is kept


def test_huge_stdout_is_truncated(level):
  code = "import sys\nsys.stdout.write('x' * 50_000_000)\nprint('END')"
  result = run(level, code, max_output_bytes=1000)
  assert result.ok and result.metadata["stdout_bytes"] == 50_000_004
  assert "[... 49999004 bytes truncated ...]" in result.text and result.text.endswith("xxEND\n")
  assert len(result.text) < 1100


def test_endless_stdout_is_bounded(level):
  result = run(level, "while True:\n  print('y' * 1000)", timeout_s=1.5, max_output_bytes=1000)
  assert result.metadata["timed_out"] and len(result.text) < 1100


def test_parent_environment_is_not_inherited(level, monkeypatch):
  token = secrets.token_hex(16)
  monkeypatch.setenv("TOOLORCH_TEST_SECRET", token)
  result = run(level, "import os\nprint(sorted(os.environ.items()))")
  assert result.ok and token not in result.text and "TOOLORCH_TEST_SECRET" not in result.text


def test_other_processes_environment_is_not_visible(level, monkeypatch):
  requires(level, "pid")
  token = secrets.token_hex(16)
  monkeypatch.setenv("TOOLORCH_TEST_SECRET", token)  # children of this test inherit it
  code = """
import os
for pid in filter(str.isdigit, os.listdir('/proc')):
  try:
    print(pid, open(f'/proc/{pid}/environ', 'rb').read())
  except OSError:
    pass
"""
  result = run(level, code)
  assert result.ok and token not in result.text


def test_background_process_does_not_outlive_the_run(level):
  marker = f"{secrets.randbelow(10**6) + 10**6}.{secrets.randbelow(10**6)}"  # `sleep MARKER`
  code = f"import subprocess, time\nsubprocess.Popen(['sleep', '{marker}'])\ntime.sleep(0.3)"
  result = run(level, code)
  assert result.ok
  assert processes_with(marker) == []


def test_daemon_in_a_new_session_does_not_outlive_the_run(level):
  requires(level, "pid")  # setsid leaves the process group; only a PID namespace catches it
  marker = f"{secrets.randbelow(10**6) + 10**6}.{secrets.randbelow(10**6)}"
  code = (f"import subprocess, time\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True,"
          " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\ntime.sleep(0.3)")
  result = run(level, code)
  assert result.ok
  assert processes_with(marker) == []


def test_refuses_to_run_unisolated_unless_allowed(monkeypatch, tmp_path):
  """With neither unshare nor bwrap to be found, `auto` refuses; allow_unisolated runs at none."""
  monkeypatch.setenv("PATH", str(tmp_path))
  probe.cache_clear()
  try:
    tool = CodeInterpreter("python", SandboxConfig())
    refused = asyncio.run(tool.call({"code": "print(1)"}))
    allowed = asyncio.run(CodeInterpreter("python", SandboxConfig(allow_unisolated=True))
                          .call({"code": "print(1)"}))
  finally:
    probe.cache_clear()
  assert refused.error == (
      "no sandbox isolation available on this machine (namespaces: unshare not found on PATH;"
      " bwrap: bwrap not found on PATH); refusing to run code unisolated (set allow_unisolated:"
      " true to allow it)")
  assert allowed.ok and allowed.text == "1\n" and allowed.metadata["isolation"] == "none"


def test_unisolated_level_must_be_allowed_explicitly():
  with pytest.raises(ConfigError, match="isolation: none .* needs allow_unisolated: true"):
    SandboxConfig(isolation="none")
  with pytest.raises(ConfigError, match="timeout_s must be > 0"):
    SandboxConfig(timeout_s=0)
