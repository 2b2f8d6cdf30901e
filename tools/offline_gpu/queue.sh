#!/usr/bin/env bash
# Usage: queue.sh [--gpu N] SECONDS:CHAPTER[,CHAPTER]... : run chapter.sh for each group in order, in the
# background (setsid, so the runs outlive the calling command) from a copy of this checkout. With --gpu N the
# queue sees only GPU N (CUDA_VISIBLE_DEVICES), so a machine with several GPUs runs one queue per GPU (a second
# queue on a GPU whose queue still runs would delete that queue's copy: wait for its "queue done"). Each
# group's notebook, result JSON and log land in /tmp/gpu-out/<chapters>; collect.sh packs them into $OUT.
set -euo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: the notebooks record it}"
gpu=0
if [ "${1:-}" = "--gpu" ]; then gpu=$2; shift 2; fi
repo=/tmp/repo-$gpu
rm -rf "$repo" && mkdir -p "$repo" /tmp/gpu-out
tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C "$repo" -xf -
cd "$repo"
CUDA_VISIBLE_DEVICES=$gpu setsid bash -c 'for spec in "$@"; do
  chapters=${spec#*:}
  echo "$(date +%T) start $chapters"
  OUT=/tmp/gpu-out/${chapters//,/-} bash tools/offline_gpu/chapter.sh "${spec%%:*}" ${chapters//,/ }
  echo "$(date +%T) end $chapters"
done; echo "$(date +%T) queue done"' queue "$@" > "/tmp/queue-$gpu.log" 2>&1 < /dev/null &
echo "queued on GPU $gpu: $*"
