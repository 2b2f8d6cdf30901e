#!/usr/bin/env bash
# Usage: collect.sh [WAIT_SECONDS] : wait, then pack what queue.sh's runs finished into $OUT/gpu-out.tgz (one
# file, within the transfer's file-count limit) and the records of finished experiments (students' run records and
# scores, measurements, memo; python -m hybridlib.carry) into $OUT/records.tgz (install.sh records restores them in a
# later session), and print each queue's progress and each log's last lines.
sleep "${1:-0}"
for q in /tmp/queue-*.log; do [ -f "$q" ] && echo "== $q" && tail -n 6 "$q"; done
for f in /tmp/log-*.txt; do [ -f "$f" ] && echo "== $f" && tr '\r' '\n' < "$f" | grep -v "^Executing" | tail -n 4; done
tail -n 2 /tmp/warm.log 2>/dev/null
nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader
tar -C /tmp/gpu-out -czf "${OUT:-.}/gpu-out.tgz" . && ls -la /tmp/gpu-out/*
(source tools/offline_gpu/env.sh && python3 -m hybridlib.carry pack "${OUT:-.}/records.tgz")
