#!/usr/bin/env bash
# Usage: queue.sh SECONDS:CHAPTER[,CHAPTER]... : run chapter.sh for each group in order, in the background
# (setsid, so the runs outlive the calling command) from a copy of this checkout at /tmp/repo. Each group's
# notebook, result JSON and log land in /tmp/gpu-out/<chapters>; collect.sh packs them into $OUT.
set -euo pipefail
rm -rf /tmp/repo && mkdir -p /tmp/repo /tmp/gpu-out
tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C /tmp/repo -xf -
cd /tmp/repo
setsid bash -c 'for spec in "$@"; do
  chapters=${spec#*:}
  echo "$(date +%T) start $chapters"
  OUT=/tmp/gpu-out/${chapters//,/-} bash tools/offline_gpu/chapter.sh "${spec%%:*}" ${chapters//,/ }
  echo "$(date +%T) end $chapters"
done; echo "$(date +%T) queue done"' queue "$@" > /tmp/queue.log 2>&1 < /dev/null &
echo "queued: $*"
