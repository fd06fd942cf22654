"""The sandbox's first process: builds the private root, drops privileges, sets limits, runs code.

`sandbox.py` starts this file's source with `python -I -S -c SOURCE CONFIG_JSON`, never as an
import: it runs before and inside the namespaces, possibly under another interpreter, and after
`pivot_root` the project's files are gone. So it uses the standard library only. One config field
per step, each optional:

  pdeathsig   die with the tool's process (the setting survives the exec of `unshare` or `bwrap`)
  exec        replace this process with that command (the launcher stage)
  root        a directory to mount a tmpfs on and build the new root in from `mounts`, then
              `pivot_root` into it (the `namespaces` level, run as PID 1 of a fresh PID namespace)
  uid, gid    switch to this unprivileged user after the root is built
  rlimits     name -> [soft, hard], set in the child just before it execs `argv`

Setup failures print one line starting with `toolorch-sandbox:` and exit 125, so the caller can
tell them from the user code's own errors.
"""

import ctypes
import json
import os
import platform
import resource
import signal
import sys

SETUP_FAILED = 125
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
# statvfs flag -> mount flag: a remount inside a user namespace must keep the flags it inherited.
_KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
               (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
               (os.ST_RELATIME, MS_RELATIME))
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
  if ret != 0:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, dst, fstype, flags, data=None):
  enc = lambda s: s.encode() if s is not None else None
  _check(_libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)),
         f"mount {src or fstype} on {dst}")


def _bind(src, dst, readonly, extra_flags=0):
  if os.path.isdir(src):
    os.makedirs(dst, exist_ok=True)
  else:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    open(dst, "a").close()
  _mount(src, dst, None, MS_BIND)
  flags = MS_BIND | MS_REMOUNT | MS_NOSUID | extra_flags | (MS_RDONLY if readonly else 0)
  kept = os.statvfs(dst).f_flag
  flags |= sum(ms for st, ms in _KEPT_FLAGS if kept & st)
  _mount(None, dst, None, flags)


def _make_dev(dst):
  os.makedirs(dst, exist_ok=True)
  _mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
  for name in DEVICES:
    _bind(f"/dev/{name}", f"{dst}/{name}", readonly=False, extra_flags=MS_NOEXEC)
  for i, name in enumerate(("stdin", "stdout", "stderr")):
    os.symlink(f"/proc/self/fd/{i}", f"{dst}/{name}")
  os.symlink("/proc/self/fd", f"{dst}/fd")


def build_root(root, mounts):
  """Mounts a tmpfs on `root`, lays out `mounts` in it, makes it read-only and pivots into it."""
  _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
  _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
  for kind, src, dst in mounts:
    target = root + dst
    if kind in ("ro", "rw"):
      _bind(src, target, readonly=kind == "ro", extra_flags=MS_NODEV)
    elif kind == "symlink":
      os.makedirs(os.path.dirname(target), exist_ok=True)
      os.symlink(src, target)
    elif kind == "dev":
      _make_dev(target)
    elif kind == "proc":
      os.makedirs(target, exist_ok=True)
      _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    else:
      raise ValueError(f"unknown mount kind {kind!r}")
  _mount(None, root, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
  number = _PIVOT_ROOT.get(platform.machine())
  if number is None:
    raise OSError(f"pivot_root: unsupported architecture {platform.machine()}")
  os.chdir(root)
  # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves no way back.
  _check(_libc.syscall(number, b".", b"."), "pivot_root")
  _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
  os.chdir("/")


def run_child(argv, rlimits):
  """Forks the user code with its limits and waits; exits as it did (128+N when killed by N)."""
  pid = os.fork()
  if pid == 0:
    try:
      for name, (soft, hard) in rlimits.items():
        resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (soft, hard))
      os.execv(argv[0], argv)
    except BaseException as err:  # still in the forked child: report, never return into the helper
      os.write(2, f"toolorch-sandbox: cannot start {argv[0]}: {err}\n".encode())
    os._exit(SETUP_FAILED)
  _, status = os.waitpid(pid, 0)
  if os.WIFSIGNALED(status):
    return 128 + os.WTERMSIG(status)
  return os.WEXITSTATUS(status)


def main(config):
  if config.get("pdeathsig"):
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != config["ppid"]:  # the tool's process died before the setting took effect
      return SETUP_FAILED
  if "exec" in config:
    os.execv(config["exec"][0], config["exec"])
  if config.get("root"):
    build_root(config["root"], config["mounts"])
  os.chdir(config["cwd"])
  _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
  if config.get("uid") is not None:
    os.setgroups([])
    os.setgid(config["gid"])
    os.setuid(config["uid"])
  return run_child(config["argv"], config.get("rlimits", {}))


if __name__ == "__main__":
  try:
    sys.exit(main(json.loads(sys.argv[1])))
  except Exception as err:  # a setup step failed: one recognisable line, a distinct exit status
    print(f"toolorch-sandbox: {err}", file=sys.stderr)
    sys.exit(SETUP_FAILED)
