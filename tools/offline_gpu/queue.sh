#!/usr/bin/env bash
# Usage: queue.sh [--gpu N[,M...]] [--tree FILE] [--set NAME=VALUE]... SECONDS:CHAPTER[,CHAPTER]... : run
# chapter.sh for each group in order, in the background (setsid, so the runs outlive the calling command) from a
# copy of this checkout. With --gpu N the queue sees only GPU N (CUDA_VISIBLE_DEVICES), so a machine with several
# GPUs runs one queue per GPU (a second queue on a GPU whose queue still runs would delete that queue's copy: wait
# for its "queue done"); --gpu 0,1 gives one queue both (the LoLCATs chapter spreads its replicates over the GPUs
# it sees). Each group's notebook, result JSON and log land in /tmp/gpu-out/<chapters>; collect.sh packs them
# into $OUT. With --tree .gpu/frozen/tree-<commit>.tar.gz (freeze.sh) the queue runs that commit's tree instead of
# this checkout, and records <commit> as the notebooks' commit. Each --set is a parameter override of every
# chapter of the queue (the book runner's -p NAME=VALUE, e.g. --set parallel=4). The records its chapters write
# (memoized arms: a LoLCATs replicate's) come back through collect.sh, so a later session on the same frozen tree
# resumes a chapter that one session cannot finish.
set -euo pipefail
gpu=0; tree=; sets=()
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
  case $1 in
    --gpu) gpu=$2; shift 2
      [[ $gpu =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "queue.sh: --gpu takes GPU indices N or N,M,..., got '$gpu'" >&2; exit 2; } ;;
    --tree) tree=$2; shift 2 ;;
    --set) [[ ${2-} =~ ^[a-z_]+=[^[:space:]]+$ ]] || { echo "queue.sh: --set takes NAME=VALUE (a chapter parameter), got '${2-}'" >&2; exit 2; }
      sets+=(-p "$2"); shift 2 ;;
    *) echo "queue.sh: unknown option '$1' (allowed: --gpu N[,M...], --tree FILE, --set NAME=VALUE)" >&2; exit 2 ;;
  esac
done
for spec in "$@"; do
  [[ $spec =~ ^[0-9]+:[a-z_]+(,[a-z_]+)*$ ]] || { echo "queue.sh: a group is SECONDS:CHAPTER[,CHAPTER]..., got '$spec'" >&2; exit 2; }
done
if [ -n "$tree" ]; then
  name=$(basename "$tree")
  [[ $name =~ ^tree-([0-9a-f]{40})\.tar\.gz$ ]] || { echo "queue.sh: --tree must name a file tree-<40-hex commit>.tar.gz written by freeze.sh, got '$tree'" >&2; exit 2; }
  export HYBRIDLIB_GIT_COMMIT=${BASH_REMATCH[1]}
fi
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: the notebooks record it}"
repo=/tmp/repo-$gpu
rm -rf "$repo" && mkdir -p "$repo" /tmp/gpu-out
touch "${QUEUE_MARKS:-/tmp}/queue-$gpu.mark"  # the queue's start: collect.sh packs its chapters' records since
if [ -n "$tree" ]; then
  tar -C "$repo" -xzf "$tree"
else
  tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C "$repo" -xf -
fi
cd "$repo"
QUEUE_SETS="${sets[*]}" CUDA_VISIBLE_DEVICES=$gpu setsid bash -c 'for spec in "$@"; do
  chapters=${spec#*:}
  echo "$(date +%T) start $chapters"
  OUT=/tmp/gpu-out/${chapters//,/-} bash tools/offline_gpu/chapter.sh "${spec%%:*}" ${chapters//,/ } $QUEUE_SETS
  echo "$(date +%T) end $chapters"
done; echo "$(date +%T) queue done"' queue "$@" > "/tmp/queue-$gpu.log" 2>&1 < /dev/null &
echo "queued on GPU $gpu (commit $HYBRIDLIB_GIT_COMMIT${sets:+; ${sets[*]}}): $*"
