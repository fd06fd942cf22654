"""Joining a multi-host JAX job, and the few host-side exchanges a multi-host run needs.

Every process of a job runs the same program and calls `initialize()` once, before any JAX op.
Where the job is described, first match wins:

1. explicit arguments (the CLI's `--coordinator-address`, `--num-processes`, `--process-id`), or
   `JAX_COORDINATOR_ADDRESS` + `JAX_NUM_PROCESSES` + `JAX_PROCESS_ID` (what `launch/local.py` sets);
2. xpk's variables on GPU: `JAX_COORDINATOR_ADDRESS` (a host) + `JAX_COORDINATOR_PORT` +
   `NNODES` + `NODE_RANK`, which JAX does not read by itself;
3. JAX's own cluster detection: TPU VM workers, SLURM (`srun`), Open MPI, Kubernetes.

Nothing described means one process, and `initialize()` does nothing.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import socket
import sys
import threading
import time
from typing import Any, Sequence

import jax
import numpy as np

from toolorch_jax.config import ConfigError

DEFAULT_TIMEOUT_S = 300  # JAX's default: how long to wait for every process to join
TIMEOUT_ENV = "TOOLORCH_DISTRIBUTED_TIMEOUT_S"
WATCHDOG_MARGIN_S = 30  # JAX's own deadline comes this much after ours
INIT_FAILED_EXIT = 2  # as the CLI's other errors a user can fix


@dataclasses.dataclass(frozen=True)
class Job:
  """Where this process stands in a job; `source` says which description it came from."""

  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  local_device_ids: tuple[int, ...] | None = None
  source: str = "auto-detect"


def _int_env(env: dict[str, str], name: str) -> int:
  try:
    return int(env[name])
  except ValueError:
    raise ConfigError(f"${name}={env[name]!r} is not an integer") from None


def _device_ids(text: str | None) -> tuple[int, ...] | None:
  return tuple(int(part) for part in text.split(",")) if text else None


def describe_job(coordinator_address: str | None = None, num_processes: int | None = None,
                 process_id: int | None = None, local_device_ids: Sequence[int] | None = None,
                 env: dict[str, str] | None = None) -> Job:
  """The job the arguments, or else the environment, describe (see the module docstring)."""
  env = dict(os.environ if env is None else env)
  devices = tuple(local_device_ids) if local_device_ids else _device_ids(env.get("JAX_LOCAL_DEVICE_IDS"))
  explicit = (coordinator_address, num_processes, process_id)
  if any(value is not None for value in explicit):
    if any(value is None for value in explicit):
      raise ConfigError("--coordinator-address, --num-processes and --process-id go together")
    return Job(coordinator_address, num_processes, process_id, devices, "arguments")
  if all(name in env for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")):
    return Job(env["JAX_COORDINATOR_ADDRESS"], _int_env(env, "JAX_NUM_PROCESSES"),
               _int_env(env, "JAX_PROCESS_ID"), devices, "JAX_* variables")
  if all(name in env for name in ("NNODES", "NODE_RANK", "JAX_COORDINATOR_ADDRESS")):
    address = env["JAX_COORDINATOR_ADDRESS"]
    if "JAX_COORDINATOR_PORT" in env and ":" not in address:
      address = f"{address}:{env['JAX_COORDINATOR_PORT']}"
    return Job(address, _int_env(env, "NNODES"), _int_env(env, "NODE_RANK"), devices,
               "xpk variables")
  return Job(local_device_ids=devices)


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: Sequence[int] | None = None,
               timeout_s: int | None = None) -> Job | None:
  """Joins the job described by the arguments or the environment; returns it, or None on one
  process (nothing described, nothing detected). Idempotent. Raises RuntimeError naming the
  coordinator when it cannot be reached within `timeout_s` (default
  ${TOOLORCH_DISTRIBUTED_TIMEOUT_S}, else 300 s); when the job does not form in that time (too few
  processes), prints why and exits with status 2, as JAX would otherwise abort without a reason."""
  from jax._src import distributed as jax_distributed  # whether this process already joined

  if jax_distributed.global_state.client is not None:
    return Job(num_processes=jax.process_count(), process_id=jax.process_index(), source="joined")
  job = describe_job(coordinator_address, num_processes, process_id, local_device_ids)
  timeout_s = int(timeout_s or os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
  if job.source == "auto-detect" and not _cluster_detected():
    return None
  if job.num_processes == 1:
    return None
  if job.process_id is not None and not 0 <= job.process_id < job.num_processes:
    raise ConfigError(f"process id {job.process_id} is outside 0..{job.num_processes - 1}"
                     f" ({job.source})")
  if job.process_id not in (None, 0):
    _wait_for_coordinator(job, timeout_s)
  # JAX aborts the process (no Python exception) when the job does not form in time, with a
  # message that does not say why; this watchdog says it first, and exits.
  watchdog = threading.Timer(timeout_s, _give_up, (job, timeout_s))
  watchdog.daemon = True
  watchdog.start()
  try:
    jax.distributed.initialize(job.coordinator_address, job.num_processes, job.process_id,
                               list(job.local_device_ids) if job.local_device_ids else None,
                               initialization_timeout=timeout_s + WATCHDOG_MARGIN_S)
  finally:
    watchdog.cancel()
  return dataclasses.replace(job, num_processes=jax.process_count(), process_id=jax.process_index())


def _wait_for_coordinator(job: Job, timeout_s: int) -> None:
  """Returns once process 0's coordinator accepts connections; RuntimeError after `timeout_s`."""
  host, _, port = job.coordinator_address.rpartition(":")
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      socket.create_connection((host.strip("[]"), int(port)), timeout=1.0).close()
      return
    except OSError as err:
      if time.monotonic() > deadline:
        raise RuntimeError(f"the coordinator {job.coordinator_address} ({job.source}) is"
                           f" unreachable: no answer within {timeout_s} s ({err}); is process 0"
                           " running, and is the address one this host can reach?") from None
      time.sleep(0.5)


def _give_up(job: Job, timeout_s: int) -> None:
  print(f"toolorch: error: the job at {job.coordinator_address or 'the detected coordinator'}"
        f" ({job.source}) did not form within {timeout_s} s: it expects"
        f" {job.num_processes or 'the detected number of'} processes and this is process"
        f" {job.process_id}; fewer processes joined (a process count that does not match the"
        " processes started, or a process that failed to start)", file=sys.stderr, flush=True)
  os._exit(INIT_FAILED_EXIT)


def _cluster_detected() -> bool:
  """Whether one of JAX's cluster environments (TPU VM, SLURM, Open MPI, Kubernetes) is here."""
  from jax._src.clusters import ClusterEnv  # JAX's own detectors, asked as initialize() would

  return any(not env.opt_in_only_method and env.is_env_present() for env in ClusterEnv._cluster_types)


def add_arguments(parser) -> None:
  """The flags every command that runs JAX takes to join a multi-host job."""
  group = parser.add_argument_group("multi-host job (default: from the environment)")
  group.add_argument("--coordinator-address", help="HOST:PORT of process 0's coordinator")
  group.add_argument("--num-processes", type=int, help="processes in the job")
  group.add_argument("--process-id", type=int, help="this process's index in the job")
  group.add_argument("--local-device-ids", help="comma-separated device ids this process uses")


def initialize_from_args(args) -> Job | None:
  return initialize(args.coordinator_address, args.num_processes, args.process_id,
                    _device_ids(args.local_device_ids))


# ----- host-side exchanges ---------------------------------------------------------------------


def is_primary() -> bool:
  """The one process that writes files shared by the job (metrics, reports, exports)."""
  return jax.process_index() == 0


def barrier(name: str) -> None:
  """Waits until every process of the job is here (e.g. after process 0 wrote a file they read)."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(name)


def process_share(count: int, index: int | None = None, processes: int | None = None) -> slice:
  """This process's contiguous share of `count` items, as balanced as possible (earlier processes
  take the extra ones)."""
  index = jax.process_index() if index is None else index
  processes = jax.process_count() if processes is None else processes
  base, extra = divmod(count, processes)
  start = index * base + min(index, extra)
  return slice(start, start + base + (index < extra))


def allgather_objects(value: Any) -> list[Any]:
  """Every process's `value` (any picklable object), in process order; one process: [value]."""
  if jax.process_count() == 1:
    return [value]
  from jax.experimental import multihost_utils

  data = np.frombuffer(pickle.dumps(value), dtype=np.uint8)
  sizes = multihost_utils.process_allgather(np.array([data.size], np.int64))
  padded = np.zeros(int(sizes.max()), np.uint8)
  padded[:data.size] = data
  gathered = multihost_utils.process_allgather(padded)
  return [pickle.loads(gathered[i, :int(sizes[i, 0])].tobytes()) for i in range(len(gathered))]


def allgather_lists(items: list[Any]) -> list[Any]:
  """Every process's `items`, concatenated in process order (each played a contiguous share)."""
  return [item for part in allgather_objects(items) for item in part]
