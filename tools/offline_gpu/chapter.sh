#!/usr/bin/env bash
# Usage: chapter.sh SECONDS CHAPTER... : run the gpu preset of CHAPTERs (in order) within SECONDS; executed
# notebooks, result JSON and the log are copied to $OUT (default ./gpu-out).
# Executed notebooks and result files are kept in /tmp/keep so later calls (fresh working-tree copies) see them.
set -uo pipefail
source tools/offline_gpu/env.sh
limit=$1; shift
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
mkdir -p /tmp/keep/book/gpu /tmp/keep/data/results book/gpu
cp -r --update=none /tmp/keep/book/gpu/. book/gpu/ ; cp -r --update=none /tmp/keep/data/results/. data/results/
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
timeout "$limit" python3 -m hybridlib.book run "$@" --preset gpu --no-deps > /tmp/log-$1.txt 2>&1
echo "rc $?; students: $(ls /tmp/hlcache/students 2>/dev/null | wc -l)"
tr '\r' '\n' < /tmp/log-$1.txt | grep -v "^Executing" | tail -n 400 > $OUT/log-$1.txt
tail -n 25 $OUT/log-$1.txt
cp -r book/gpu/. /tmp/keep/book/gpu/; cp -r data/results/. /tmp/keep/data/results/
for c in "$@"; do
  cp -f "book/gpu/$(python3 -c 'import sys; from hybridlib.chapters import chapter; print(chapter(sys.argv[1]).notebook)' "$c")" $OUT/ 2>/dev/null
  cp -f data/results/$c/*gpu*.json $OUT/ 2>/dev/null
done
ls -la $OUT
