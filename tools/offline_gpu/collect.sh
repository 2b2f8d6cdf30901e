#!/usr/bin/env bash
# Usage: collect.sh [WAIT_SECONDS] : wait, then pack what queue.sh's runs finished into $OUT/gpu-out.tgz (one
# file, within the transfer's file-count limit) and print the queue's progress.
sleep "${1:-0}"
tail -n 8 /tmp/queue.log
for f in /tmp/log-*.txt; do [ -f "$f" ] && echo "== $f" && tr '\r' '\n' < "$f" | grep -v "^Executing" | tail -n 3; done
tail -n 2 /tmp/warm.log 2>/dev/null
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tar -C /tmp/gpu-out -czf "${OUT:-.}/gpu-out.tgz" . && ls -la /tmp/gpu-out/*
