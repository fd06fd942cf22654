#!/usr/bin/env bash
# Runs a toolorch command on every worker of a Cloud TPU VM (one process per worker; JAX finds the
# other workers itself), after copying this checkout there and installing it.
#
#   launch/tpu_vm.sh --tpu NAME --zone ZONE [--project P] [--setup] -- toolorch train --config ... ARGS
#   launch/tpu_vm.sh --tpu NAME --zone ZONE --kill       # frees a TPU that a dead run still holds
#
# --setup copies and installs only; without a command after --, the script stops after setup.
# Each run copies the working tree again (git ls-files: tracked and untracked, not ignored files),
# so a worker always runs what is here. Environment variables named in --env NAME (repeatable)
# are passed on, e.g. --env TOOLORCH_DATA_DIR --env WANDB_API_KEY.
set -euo pipefail

tpu="" zone="" project="" setup_only=0 kill=0 remote_dir="toolorch" pass_env=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tpu) tpu="$2"; shift 2 ;;
    --zone) zone="$2"; shift 2 ;;
    --project) project="$2"; shift 2 ;;
    --remote-dir) remote_dir="$2"; shift 2 ;;
    --env) pass_env+=("$2"); shift 2 ;;
    --setup) setup_only=1; shift ;;
    --kill) kill=1; shift ;;
    --) shift; break ;;
    *) echo "tpu_vm.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -n "$tpu" && -n "$zone" ]] || { echo "tpu_vm.sh: --tpu and --zone are required" >&2; exit 2; }

gcloud_tpu=(gcloud compute tpus tpu-vm)
where=(--zone "$zone" --worker=all)
[[ -n "$project" ]] && where+=(--project "$project")

on_all_workers() {  # the same shell command on every worker, output prefixed by gcloud per worker
  "${gcloud_tpu[@]}" ssh "$tpu" "${where[@]}" --command "$1"
}

if [[ $kill -eq 1 ]]; then
  # A killed run can leave a process holding the TPU devices (v4: /dev/accel*, v5e/v5p/v6e:
  # /dev/vfio/*) and libtpu's lock file; the next run then fails with "TPU in use".
  on_all_workers 'sudo lsof -t /dev/accel* /dev/vfio/* 2>/dev/null | sort -u | xargs -r sudo kill -9;
                  sudo rm -f /tmp/libtpu_lockfile; echo "$(hostname): TPU free"'
  exit 0
fi

# ----- copy and install --------------------------------------------------------------------------
cd "$(dirname "$0")/.."
archive="$(mktemp -t toolorch.XXXXXX.tar.gz)"
trap 'rm -f "$archive"' EXIT
git ls-files -z --cached --others --exclude-standard | tar -czf "$archive" --null -T -
"${gcloud_tpu[@]}" scp "$archive" "$tpu:toolorch.tar.gz" "${where[@]}"
on_all_workers "mkdir -p $remote_dir && tar -xzf toolorch.tar.gz -C $remote_dir && cd $remote_dir &&
  { [[ -x .venv/bin/python ]] || python3 -m venv .venv; } &&
  .venv/bin/pip install --quiet --upgrade pip &&
  .venv/bin/pip install --quiet -e '.[tpu,gcs,serve]' &&
  .venv/bin/pip install --quiet --no-deps google-jetstream==0.2.2"
[[ $setup_only -eq 1 || $# -eq 0 ]] && exit 0

# ----- run ---------------------------------------------------------------------------------------
exports=""
for name in "${pass_env[@]}"; do
  exports+="export $name=$(printf '%q' "${!name-}"); "
done
[[ "$1" == toolorch ]] && shift  # `-- toolorch train ...` and `-- train ...` both work
on_all_workers "cd $remote_dir && $exports .venv/bin/toolorch $(printf '%q ' "$@")"
