#!/usr/bin/env bash
# Usage: lines.sh FILE : run FILE's lines one after another (each with bash -c, in this directory), waiting for
# lines appended later (echo CMD >> FILE from a later call: the next run is chosen after the last one's figures,
# with the GPU never idle in between) until a line `end`. Start it detached after env.sh is sourced
# (setsid bash tools/offline_gpu/lines.sh /tmp/gpu-out/lines.txt > /tmp/gpu-out/lines.log 2>&1 < /dev/null &) and
# keep a call in flight (collect.sh). Logs each line's start, end and exit status.
set -u
file=${1:?usage: lines.sh FILE}
i=1
while :; do
  line=$(sed -n "${i}p" "$file" 2>/dev/null)
  [ -z "$line" ] && { sleep 3; continue; }
  [ "$line" = end ] && break
  echo "$(date +%T) start $i: $line"
  bash -c "$line"
  rc=$?
  echo "$(date +%T) rc $rc ($i)"
  i=$((i + 1))
done
echo "$(date +%T) lines done"
