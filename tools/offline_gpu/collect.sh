#!/usr/bin/env bash
# Usage: collect.sh [WAIT_SECONDS] : wait, then pack what queue.sh's runs finished into $OUT/gpu-out.tgz (one
# file, within the transfer's file-count limit) and the records each queue's chapters wrote since it started
# (records-queue-<G>-partial.tgz: memoized arms, for `install.sh records` in a later session; marks in
# $QUEUE_MARKS, default /tmp), copy the campaign's per-replicate records (campaign.sh:
# /tmp/gpu-out/records-r<R>.tgz, ~8 MB each, or records-b<N>-r<R>.tgz with --budget N; install.sh records restores
# one in a later session) into $OUT (the 6 last written: 8 files come back a call, and the older ones came back in
# an earlier call) with the replicate under way's finished arms (records-r<R>-partial.tgz: a machine taken back then
# loses only the arms finished since the last collect and the one under way), and print each queue's progress and
# each log's last lines.
# collect.sh --until SECONDS : collect every $COLLECT_EVERY seconds (default 20; each round's lines to
# $OUT/collect.out) until every campaign and queue whose log is in $GPU_LOGS (default /tmp) has ended (the log's last
# line says "share done", "share failed" or "queue done") or the next round would pass SECONDS from now, then collect
# once more and print it: a call ends when its runs do, e.g. `collect.sh --until $((560 - SECONDS))`.
logs=${GPU_LOGS:-/tmp}
ended() {  # every campaign and queue log ends with its end line (none: nothing runs)
  local f
  for f in "$logs"/campaign*.log "$logs"/queue-*.log; do
    [ -f "$f" ] || continue
    tr '\r' '\n' < "$f" | grep -v '^[[:space:]]*$' | tail -n 1 \
      | grep -Eq '(share (done|failed)|queue done)$' || return 1
  done
}
collect_round() {
  for q in "$logs"/queue-*.log "$logs"/campaign*.log; do
    [ -f "$q" ] && echo "== $q" && tr "\r" "\n" < "$q" | grep -v "%|" | tail -n 6
  done
  for f in /tmp/log-*.txt; do
    [ -f "$f" ] && echo "== $f" && tr '\r' '\n' < "$f" | grep -v "^Executing" | tail -n 4
  done
  tail -n 2 /tmp/warm.log 2>/dev/null
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader
  from=${GPU_OUT:-/tmp/gpu-out}  # where the runs write (GPU_OUT: another folder, e.g. a test's)
  mkdir -p "$from"
  for mark in "${QUEUE_MARKS:-/tmp}"/queue-*.mark; do  # each queue's records since its start (queue.sh's mark)
    [ -f "$mark" ] || continue
    (source tools/offline_gpu/env.sh && python3 -m hybridlib.carry pack --newer "$mark" \
      "$from/records-$(basename "$mark" .mark)-partial.tgz") 2>&1 | tail -n 1
  done
  tar -C "$from" --exclude='./records-*.tgz' -czf "${OUT:-.}/gpu-out.tgz" . && ls -la "$from"/
  last=$(find "$from" -maxdepth 1 -name 'records-*.tgz' -printf '%T@ %f\n' | sort -rn | head -n 6 | cut -d' ' -f2-)
  # a call that collects in a loop keeps only these (a partial renamed since, gone)
  for f in "${OUT:-.}"/records-*.tgz; do
    [ -f "$f" ] && ! grep -qxF "$(basename "$f")" <<< "$last" && rm -f "$f"
  done
  for f in $last; do cp "$from/$f" "${OUT:-.}/"; done
}
if [ "${1-}" = --until ]; then
  [[ ${2-} =~ ^[0-9]+$ ]] || { echo "collect.sh: --until takes whole seconds from now, got '${2-}'" >&2; exit 2; }
  every=${COLLECT_EVERY:-20}
  [[ $every =~ ^[1-9][0-9]*$ ]] || {
    echo "collect.sh: COLLECT_EVERY takes whole seconds >= 1, got '$every'" >&2; exit 2; }
  while ! ended && [ $((SECONDS + every)) -lt "$2" ]; do
    collect_round > "${OUT:-.}/collect.out" 2>&1
    sleep "$every"
  done
  collect_round 2>&1 | tee "${OUT:-.}/collect.out"
else
  [[ ${1:-0} =~ ^[0-9]+$ ]] || { echo "collect.sh: takes WAIT_SECONDS or --until SECONDS, got '$1'" >&2; exit 2; }
  sleep "${1:-0}"
  collect_round
fi
