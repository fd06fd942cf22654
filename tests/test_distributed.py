"""Multi-host runs on this machine, through `launch/local.py`: joining a job (explicit, xpk, SLURM
variables), bad launches that fail in bounded time and say why, GRPO on 2 processes x 4 devices
against 1 process x 8 devices, and a SIGKILL of one process resumed to the same parameters."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from tests.checkpoint_params import final_params
from tests.rl.guess_env import write_guess_run
from toolorch_jax.config import ConfigError
from toolorch_jax.distributed import describe_job, process_share

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCAL = str(ROOT / "launch" / "local.py")
TOOLORCH = [sys.executable, "-m", "toolorch_jax.cli"]


def launch(processes: int, devices: int, command: list[str], **env) -> subprocess.Popen:
  return subprocess.Popen(
      [sys.executable, LOCAL, "--processes", str(processes), "--devices-per-process", str(devices),
       "--", *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str]:
  """(exit status, output); past `timeout`, the launcher is stopped (it stops its processes)."""
  try:
    out, _ = process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    process.terminate()
    out, _ = process.communicate()
    pytest.fail(f"no end after {timeout} s; output:\n{out[-20000:]}")
  return process.returncode, out


def running_with(marker: str) -> list[psutil.Process]:
  found = []
  for proc in psutil.process_iter(["cmdline"]):
    if any(marker in part for part in proc.info["cmdline"] or ()):
      found.append(proc)
  return found


# ----- describing and joining a job --------------------------------------------------------------


def test_job_description_order():
  both = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1", "JAX_COORDINATOR_PORT": "1234", "NNODES": "4",
          "NODE_RANK": "3"}
  job = describe_job(env=both)
  assert (job.coordinator_address, job.num_processes, job.process_id, job.source) == (
      "10.0.0.1:1234", 4, 3, "xpk variables")
  jax_vars = {**both, "JAX_COORDINATOR_ADDRESS": "h:9", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"}
  assert describe_job(env=jax_vars).source == "JAX_* variables"
  assert describe_job(env=jax_vars).coordinator_address == "h:9"
  explicit = describe_job("a:1", 8, 7, env=jax_vars)
  assert (explicit.coordinator_address, explicit.num_processes, explicit.source) == ("a:1", 8, "arguments")
  assert describe_job(env={"JAX_LOCAL_DEVICE_IDS": "0,1"}) .local_device_ids == (0, 1)
  assert describe_job(env={}).source == "auto-detect"
  with pytest.raises(ConfigError, match="go together"):
    describe_job("a:1", env={})
  with pytest.raises(ConfigError, match=r"\$NNODES='x' is not an integer"):
    describe_job(env={**both, "NNODES": "x"})


def test_process_shares_are_contiguous_and_balanced():
  shares = [process_share(7, i, 3) for i in range(3)]
  assert shares == [slice(0, 3), slice(3, 5), slice(5, 7)]
  assert process_share(1, 1, 2) == slice(1, 1)


PROBE = textwrap.dedent("""
    import toolorch_jax.distributed as d
    job = d.initialize()
    import jax, jax.numpy as jnp
    from jax.experimental import multihost_utils
    import sys
    total = int(multihost_utils.process_allgather(jnp.ones(())).sum())
    # One write on stderr: Gloo's C++ threads print to stdout in pieces ("[Gloo] Rank " ...), and
    # a piece left there just before this line would put it mid-line.
    sys.stderr.write(f"process {jax.process_index()} of {jax.process_count()} ({job.source}),"
                     f" {len(jax.devices())} devices, sum {total}\\n")
""")


def test_slurm_variables_alone_form_the_job(tmp_path):
  """What `srun` sets, with no JAX_* variable: initialize() with no arguments finds the job."""
  probe = tmp_path / "probe.py"
  probe.write_text(PROBE)
  srun = (f"SLURM_PROCID=$JAX_PROCESS_ID SLURM_LOCALID=$JAX_PROCESS_ID SLURM_NTASKS=2 SLURM_JOB_ID=77"
          f" SLURM_STEP_NODELIST=localhost JAX_COORDINATOR_PORT=${{JAX_COORDINATOR_ADDRESS##*:}}"
          f" exec env -u JAX_COORDINATOR_ADDRESS -u JAX_NUM_PROCESSES -u JAX_PROCESS_ID"
          f" {sys.executable} {probe}")
  code, out = finish(launch(2, 2, ["sh", "-c", srun]), timeout=120)
  assert code == 0, out
  for index in range(2):
    assert f"[{index}] process {index} of 2 (auto-detect)" in out, out
  assert "sum 2" in out


@pytest.mark.parametrize("case", ["unreachable", "count_mismatch"])
def test_a_bad_launch_fails_in_bounded_time_and_names_the_cause(tmp_path, case):
  marker = str(tmp_path / "bad-launch-marker")
  command = [*TOOLORCH, "eval", "--env", marker, "--policy", "gold", "--out", marker]
  if case == "unreachable":  # process 1 alone, pointed at a port nobody listens on
    import socket

    with socket.socket() as sock:
      sock.bind(("127.0.0.1", 0))
      port = sock.getsockname()[1]
    command = ["env", "JAX_NUM_PROCESSES=2", "JAX_PROCESS_ID=1",
               f"JAX_COORDINATOR_ADDRESS=127.0.0.1:{port}", *command]
    processes, expected = 1, f"the coordinator 127.0.0.1:{port} (JAX_* variables) is unreachable"
  else:  # two processes started, three announced
    command = ["env", "JAX_NUM_PROCESSES=3", *command]
    processes, expected = 2, "did not form within 3 s: it expects 3 processes"
  start = time.monotonic()
  code, out = finish(launch(processes, 1, command, TOOLORCH_DISTRIBUTED_TIMEOUT_S="3"), timeout=120)
  assert code == 2 and expected in out, out
  assert time.monotonic() - start < 60
  assert not running_with(marker)


def test_the_launcher_stops_the_rest_when_one_fails(tmp_path):
  marker = str(tmp_path / "launcher-marker")
  script = ("import os, sys, time; i = int(os.environ['JAX_PROCESS_ID']);"
            " time.sleep(0.5) if i == 1 else time.sleep(600); sys.exit(3)")
  start = time.monotonic()
  code, out = finish(launch(3, 1, [sys.executable, "-c", script, marker]), timeout=60)
  assert code == 3 and "process 1 exited with 3; stopping the others" in out, out
  assert time.monotonic() - start < 30
  assert not running_with(marker)
  code, _ = finish(launch(2, 1, [sys.executable, "-c", "import os; assert os.environ['JAX_NUM_CPU_DEVICES'] == '1'"]))
  assert code == 0


def test_the_launcher_passes_on_whole_lines_per_stream(tmp_path):
  """A line a process writes in pieces, interleaved with its stderr, and a last line without a
  newline right before it exits, each come out whole on the launcher's matching stream."""
  script = ("import os; i = os.environ['JAX_PROCESS_ID'].encode();"
            " os.write(1, b'out ' + i + b' begins '); os.write(2, b'err ' + i + b'\\n');"
            " os.write(1, b'and ends\\n'); os.write(1, b'tail ' + i + b' without newline'); os._exit(0)")
  run = subprocess.run([sys.executable, LOCAL, "--processes", "2", "--", sys.executable, "-c", script],
                       capture_output=True, text=True, timeout=60)
  assert run.returncode == 0, run.stderr
  assert sorted(run.stdout.splitlines(keepends=True)) == [
      f"[{i}] {line}\n" for i in (0, 1) for line in (f"out {i} begins and ends", f"tail {i} without newline")]
  assert sorted(run.stderr.splitlines(keepends=True)) == ["[0] err 0\n", "[1] err 1\n"]


def test_the_launcher_loses_no_output_when_its_reader_is_slow(tmp_path):
  """Processes that exit at once after writing more than the launcher's output pipe holds, read
  only seconds later: every line arrives (a launcher that stops waiting for its output dropped
  what the pipe could not take)."""
  lines = 1000  # 50 kB per process: fits its own pipe (64 KiB), so it exits at once
  script = (f"import os, sys; i = os.environ['JAX_PROCESS_ID'];"
            f" os.write(1, b''.join(b'%s line %05d ....................................\\n' % (i.encode(), n)"
            f" for n in range({lines}))); open(sys.argv[1] + i, 'w').close(); os._exit(0)")
  done = str(tmp_path / "done")
  launcher = subprocess.Popen([sys.executable, LOCAL, "--processes", "2", "--", sys.executable,
                               "-c", script, done], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  deadline = time.monotonic() + 60
  while not all(os.path.exists(done + i) for i in "01"):
    assert time.monotonic() < deadline, "the processes did not get to the end of their output"
    time.sleep(0.05)
  time.sleep(3)  # nobody reads the launcher's output meanwhile
  out, err = launcher.communicate(timeout=60)
  assert launcher.returncode == 0, err
  for i in (0, 1):
    mine = [line for line in out.splitlines() if line.startswith(f"[{i}] ".encode())]
    assert mine == [b"[%d] %d line %05d ...................................." % (i, i, n)
                    for n in range(lines)]


# ----- GRPO on several processes -----------------------------------------------------------------

STEPS = 5  # the uninterrupted run; the parity run stops at PARITY_STEPS
PARITY_STEPS = 3


@pytest.fixture(scope="module")
def grpo(tmp_path_factory):
  """The tiny GRPO run of tests/rl/test_trainer.py on a mesh of 8 devices (tensor pairs inside a
  host), its rows split over fsdp so each process feeds its own; a compilation cache the runs share."""
  pytest.importorskip("jetstream", reason="training rollouts need the 'serve' extra and JetStream")
  root = tmp_path_factory.mktemp("multihost")
  path = write_guess_run(root, f"steps: {STEPS}, seq_len: 96, micro_batch_rows: 8,"
                         " keep_checkpoints: 10, progress: false, tensorboard: false",
                         mesh="mesh: {data: 1, fsdp: 4, tensor: 2}")
  env = {"JAX_COMPILATION_CACHE_DIR": str(root / "jax_cache"),
         "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}

  def train(workdir, processes, *overrides):
    return launch(processes, 8 // processes, [*TOOLORCH, "train", "--config", str(path),
                                              "--workdir", str(workdir), *overrides], **env)

  straight = root / "straight"
  code, out = finish(train(straight, 2))
  assert code == 0, out
  return train, straight


# The one reduction that differs: an all-reduce across processes (gloo) sums in another order than
# XLA's in-process one (a sum of 8 float32 shards: 2388 of 4096 sums differed in their last bits),
# so gradients of sharded weights differ by an ulp, which Adam's normalisation carries into the
# update of near-zero gradient components. Measured after 3 steps: largest difference 1.17e-06,
# 53514 of 139648 parameters differ; bounded here by a thousandth of what steps 2-3 changed.
PARITY_SHARE_OF_UPDATE = 1e-3


@pytest.mark.slow
def test_two_processes_train_as_one(grpo, tmp_path):
  train, straight = grpo
  code, out = finish(train(tmp_path, 1, f"train.steps={PARITY_STEPS}"))
  assert code == 0, out
  # The same episodes, rewards and batches, step by step ...
  same = ("reward/mean", "rollout/episodes", "train/kept_episodes", "train/tokens", "turns")
  runs = [[json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
          for workdir in (tmp_path, straight)]
  assert [m["step"] for m in runs[1]] == list(range(1, STEPS + 1))  # one writer, not two
  assert runs[1][0]["rollout/episodes"] == 8.0  # both processes' episodes, gathered
  for one, two in zip(*runs):
    assert {k: one[k] for k in same} == {k: two[k] for k in same}
  # ... and the same parameters, to the last bits that the cross-process all-reduce changes.
  one = final_params(str(tmp_path / "checkpoints"), PARITY_STEPS)
  two = final_params(str(straight / "checkpoints"), PARITY_STEPS)
  start = final_params(str(straight / "checkpoints"), 1)
  assert one.keys() == two.keys() and len(one) > 10
  assert any(not np.array_equal(start[k], two[k]) for k in two)  # it learned something
  largest = max(float(np.max(np.abs(one[k] - two[k]))) for k in one)
  update = max(float(np.max(np.abs(two[k] - start[k]))) for k in two)
  differing = sum(int(np.sum(one[k] != two[k])) for k in one)
  print(f"parity after {PARITY_STEPS} steps: largest abs difference {largest:.3g} (steps 2-3 moved"
        f" parameters by up to {update:.3g}), {differing} of {sum(v.size for v in one.values())}"
        " parameters differ")
  assert largest <= PARITY_SHARE_OF_UPDATE * update


# Read in a fresh interpreter: in this one, gcsfs keeps listings of gs:// from before.
LIST_STEPS = ("import sys; from toolorch_jax.checkpoint import TrainCheckpointer;"
              " print(TrainCheckpointer(sys.argv[1]).all_steps())")
SAVE_PARAMS = ("import sys, numpy as np; from tests.checkpoint_params import final_params;"
               " np.savez(sys.argv[4], **final_params(sys.argv[1], int(sys.argv[2]), sys.argv[3]))")


def fresh(script: str, *args: str) -> str:
  return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                        check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                        timeout=180).stdout


def saved_steps(checkpoints: str) -> list[int]:
  return json.loads(fresh(LIST_STEPS, checkpoints).splitlines()[-1])


def kill_one_process_after_a_checkpoint(train, workdir, checkpoints, *overrides) -> None:
  """Starts the 2-process run and SIGKILLs process 1 once step STEPS - 1 is logged; checks that
  the run stopped short with a checkpoint committed."""
  run = train(workdir, 2, *overrides)
  metrics = workdir / "metrics.jsonl"
  deadline = time.time() + 300
  while run.poll() is None and time.time() < deadline:
    if metrics.is_file() and len(metrics.read_text().splitlines()) >= STEPS - 1:
      break
    time.sleep(0.05)
  assert run.poll() is None, finish(run)[1]
  launcher = psutil.Process(run.pid)
  process_1 = next(c for c in launcher.children() if c.environ().get("JAX_PROCESS_ID") == "1")
  process_1.send_signal(signal.SIGKILL)
  code, out = finish(run)
  assert code == 128 + signal.SIGKILL and "process 1 exited with 137" in out, out
  saved = saved_steps(checkpoints)  # on the GCS emulator, commits can lag a few steps behind
  assert saved and saved[-1] < STEPS, saved
  print(f"killed with checkpoints {saved} written")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local", "gcs"])
def test_sigkill_of_one_process_then_resume_ends_equal(grpo, tmp_path, where, request):
  """Checkpoints on local disk, or on gs:// (the GCS emulator, in its own process on loopback)."""
  train, straight = grpo
  checkpoints, overrides = str(tmp_path / "checkpoints"), []
  if where == "gcs":
    checkpoints = f"{request.getfixturevalue('gcs_emulator')}/{tmp_path.name}"
    overrides = [f"train.checkpoint_dir={checkpoints}"]
  kill_one_process_after_a_checkpoint(train, tmp_path, checkpoints, *overrides)
  code, out = finish(train(tmp_path, 2, *overrides))
  assert code == 0, out
  assert STEPS in saved_steps(checkpoints), out[-20000:]
  expected = final_params(str(straight / "checkpoints"), STEPS)
  fresh(SAVE_PARAMS, checkpoints, str(STEPS), str(straight / "checkpoints"), str(tmp_path / "p.npz"))
  with np.load(tmp_path / "p.npz") as saved:
    resumed = dict(saved)
  assert resumed.keys() == expected.keys()
  assert all(np.array_equal(resumed[k], expected[k]) for k in expected)
