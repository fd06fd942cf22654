#!/usr/bin/env bash
# Builds the image of launch/Dockerfile, pushes it, and starts a toolorch command as an xpk
# workload on a GKE cluster: TPU slices, or GPU nodes (xpk sets NNODES, NODE_RANK,
# JAX_COORDINATOR_ADDRESS and JAX_COORDINATOR_PORT there, which toolorch_jax.distributed reads).
#
#   launch/xpk.sh --cluster C --workload W --device-type v5p-64 --image REGISTRY/toolorch:TAG \
#       [--slices 1] [--project P] [--zone Z] -- toolorch train --config configs/orchestra-8b.yaml ...
#   launch/xpk.sh --cluster C --workload W --device-type h100-80gb-8 --nodes 2 --image ... -- ...
#   launch/xpk.sh --cluster C --workload W --delete
#
# The device type decides the accelerator the image is built for (tpu for v*, cuda otherwise).
# --no-build reuses an image already pushed.
set -euo pipefail

cluster="" workload="" device="" image="" slices=1 nodes=1 build=1 delete=0 extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cluster) cluster="$2"; shift 2 ;;
    --workload) workload="$2"; shift 2 ;;
    --device-type) device="$2"; shift 2 ;;
    --image) image="$2"; shift 2 ;;
    --slices) slices="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --project|--zone) extra+=("$1=$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --delete) delete=1; shift ;;
    --) shift; break ;;
    *) echo "xpk.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -n "$cluster" && -n "$workload" ]] || { echo "xpk.sh: --cluster and --workload are required" >&2; exit 2; }

if [[ $delete -eq 1 ]]; then
  exec xpk workload delete --cluster "$cluster" --workload "$workload" "${extra[@]}"
fi
[[ -n "$device" && -n "$image" && $# -gt 0 ]] || {
  echo "xpk.sh: --device-type, --image and a command after -- are required" >&2; exit 2; }

case "$device" in
  v*) accel=tpu; scale=(--num-slices "$slices") ;;
  *) accel=cuda; scale=(--num-nodes "$nodes") ;;
esac

cd "$(dirname "$0")/.."
if [[ $build -eq 1 ]]; then
  docker build -f launch/Dockerfile --build-arg ACCEL="$accel" -t "$image" .
  docker push "$image"
fi
[[ "$1" == toolorch ]] && shift
xpk workload create --cluster "$cluster" --workload "$workload" --device-type "$device" \
  "${scale[@]}" --docker-image "$image" "${extra[@]}" \
  --command "toolorch $(printf '%q ' "$@")"
