#!/usr/bin/env bash
# Usage: collect.sh [WAIT_SECONDS] : wait, then pack what queue.sh's runs finished into $OUT/gpu-out.tgz (one
# file, within the transfer's file-count limit) and the memo of finished experiments into $OUT/memo.tgz (install.sh
# memo restores it in a later session), and print each queue's progress and each log's last lines.
sleep "${1:-0}"
for q in /tmp/queue-*.log; do [ -f "$q" ] && echo "== $q" && tail -n 6 "$q"; done
for f in /tmp/log-*.txt; do [ -f "$f" ] && echo "== $f" && tr '\r' '\n' < "$f" | grep -v "^Executing" | tail -n 4; done
tail -n 2 /tmp/warm.log 2>/dev/null
nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader
tar -C /tmp/gpu-out -czf "${OUT:-.}/gpu-out.tgz" . && ls -la /tmp/gpu-out/*
[ -d /tmp/hlcache/memo ] && tar -C /tmp/hlcache -czf "${OUT:-.}/memo.tgz" memo && ls -la "${OUT:-.}/memo.tgz"
