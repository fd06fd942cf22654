"""Runs a command as N processes of one JAX job on this machine, with a loopback coordinator.

    python launch/local.py --processes 2 --devices-per-process 4 -- toolorch train ...

Each process gets `JAX_COORDINATOR_ADDRESS` (127.0.0.1 and a free port), `JAX_NUM_PROCESSES` and
`JAX_PROCESS_ID`, which `toolorch_jax.distributed.initialize()` reads, and, with
`--devices-per-process`, that many CPU devices (`JAX_NUM_CPU_DEVICES`; JAX on CPU otherwise has
one). The exit status is the first non-zero one (128 + signal for a process killed by a signal),
or 0 when every process succeeds; when one fails, the others are killed, so a failed launch never
leaves a process behind. Each process's stdout and stderr lines come out on this launcher's stdout
and stderr, whole, with the process index in front.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long


def free_port() -> int:
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1]


def process_env(index: int, processes: int, port: int, devices: int | None) -> dict[str, str]:
  env = dict(os.environ, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
             JAX_NUM_PROCESSES=str(processes), JAX_PROCESS_ID=str(index), PYTHONUNBUFFERED="1")
  if devices:
    # The XLA flag would override jax_num_cpu_devices, and a parent (pytest) may have set it.
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env.update(XLA_FLAGS=" ".join(flags), JAX_NUM_CPU_DEVICES=str(devices), JAX_PLATFORMS="cpu")
  return env


class _Lines:
  """One process's stdout or stderr, passed on a whole line at a time with its index in front: a
  line never mixes with another process's output, and a last line without a newline gets one."""

  def __init__(self, index: int, out) -> None:
    self.prefix = f"[{index}] ".encode()
    self.out = out
    self.pending = b""

  def feed(self, data: bytes) -> None:
    *lines, self.pending = (self.pending + data).split(b"\n")
    for line in lines:
      self.out.write(self.prefix + line + b"\n")
    self.out.flush()

  def close(self) -> None:
    if self.pending:
      self.feed(b"\n")


def _exit_code(returncode: int) -> int:
  return 128 - returncode if returncode < 0 else returncode


def _signal(children: list[subprocess.Popen], signum: int) -> None:
  for child in children:
    if child.poll() is None:
      os.killpg(child.pid, signum)


def _stop(children: list[subprocess.Popen]) -> None:
  """SIGTERM to each process group still running, SIGKILL to whatever outlives the grace."""
  _signal(children, signal.SIGTERM)
  deadline = time.monotonic() + GRACE_S
  for child in children:
    try:
      child.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
      os.killpg(child.pid, signal.SIGKILL)
      child.wait()


def run(command: list[str], processes: int, devices: int | None) -> int:
  port = free_port()
  # Each in its own process group, so stopping a process also stops whatever it started.
  children = [subprocess.Popen(command, env=process_env(index, processes, port, devices),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
              for index in range(processes)]

  def on_signal(signum, frame):
    _stop(children)
    sys.exit(128 + signum)

  for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, on_signal)
  # One thread reads every pipe to its end, so nothing a process wrote is dropped when it exits,
  # even when whoever reads this launcher's output is slow; stdout and stderr stay apart, so a
  # process's C++ logs (stderr) do not land inside the lines it prints (stdout).
  selector = selectors.DefaultSelector()
  for index, child in enumerate(children):
    selector.register(child.stdout, selectors.EVENT_READ, _Lines(index, sys.stdout.buffer))
    selector.register(child.stderr, selectors.EVENT_READ, _Lines(index, sys.stderr.buffer))
  first_failure = 0
  kill_at = None  # when processes told to stop get SIGKILL
  quiet_since = None  # since when every process has exited and no output came
  try:
    while selector.get_map():
      events = selector.select(timeout=0.05)
      for key, _ in events:
        data = os.read(key.fd, 1 << 16)
        if data:
          key.data.feed(data)
        else:
          key.data.close()
          selector.unregister(key.fileobj)
      running = [c for c in children if c.poll() is None]
      failed = [c for c in children if c.returncode not in (None, 0)]
      if running and failed and not first_failure:
        first_failure = _exit_code(failed[0].returncode)
        print(f"launch/local.py: process {children.index(failed[0])} exited with {first_failure};"
              " stopping the others", file=sys.stderr, flush=True)
        _signal(running, signal.SIGTERM)
        kill_at = time.monotonic() + GRACE_S
      if running and kill_at and time.monotonic() > kill_at:
        _signal(running, signal.SIGKILL)
      if running or events:
        quiet_since = None
      elif quiet_since is None:
        quiet_since = time.monotonic()
      elif time.monotonic() - quiet_since > GRACE_S:
        print("launch/local.py: the processes exited but their output stays open (held by a"
              " process that left their process group); not waiting for it", file=sys.stderr,
              flush=True)
        break
  finally:
    _stop(children)
    for key in list(selector.get_map().values()):
      key.data.close()
  if first_failure:
    return first_failure
  return next((_exit_code(c.returncode) for c in children if c.returncode), 0)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   usage="%(prog)s --processes N [--devices-per-process K] -- COMMAND [ARGS...]")
  parser.add_argument("--processes", type=int, required=True, help="processes to start (N)")
  parser.add_argument("--devices-per-process", type=int, default=None,
                      help="CPU devices each process sees (K; default: JAX's own)")
  parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
  args = parser.parse_args(argv)
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command:
    parser.error("give the command to run after --")
  if args.processes < 1 or (args.devices_per_process is not None and args.devices_per_process < 1):
    parser.error("--processes and --devices-per-process must be >= 1")
  return run(command, args.processes, args.devices_per_process)


if __name__ == "__main__":
  sys.exit(main())
