#!/usr/bin/env bash
# Usage: chapter.sh SECONDS CHAPTER... [-p NAME=VALUE ...] : run the gpu preset of CHAPTERs (in order) within
# SECONDS in all, with the book runner's parameter overrides after the chapters; each chapter runs on its own, and the
# notebook and result JSON it wrote go to $OUT/<chapter>/ (default OUT: ./gpu-out) as soon as it finishes, its log
# (cell output streamed as it runs) to $OUT/log-<chapter>.txt. Outputs are kept in $KEEP (default /tmp/keep) so
# later calls (fresh working-tree copies) see them.
set -uo pipefail
source tools/offline_gpu/env.sh
limit=$1; shift
chapters=(); while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do chapters+=("$1"); shift; done  # the rest: overrides
OUT=${OUT:-gpu-out}; KEEP=${KEEP:-/tmp/keep}; mkdir -p "$OUT"
mkdir -p "$KEEP"/book/gpu "$KEEP"/data/results book/gpu
cp -r --update=none "$KEEP"/book/gpu/. book/gpu/ ; cp -r --update=none "$KEEP"/data/results/. data/results/
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
deadline=$((SECONDS + limit))
for c in "${chapters[@]}"; do  # one runner call per chapter: a chapter's outputs are kept as soon as it finishes
  left=$((deadline - SECONDS)); [ "$left" -gt 0 ] || { echo "no time left for $c"; break; }
  marker=$(mktemp)  # only files written after it are this run's results (never the committed ones)
  log=/tmp/log-$c.txt
  timeout "$left" python3 -m hybridlib.book run "$c" "$@" --preset gpu --no-deps --log-output > "$log" 2>&1
  echo "$c: rc $?; students: $(ls /tmp/hlcache/students 2>/dev/null | wc -l)"
  tr '\r' '\n' < "$log" | grep -v "^Executing" | tail -n 400 > "$OUT/log-$c.txt"
  tail -n 25 "$OUT/log-$c.txt"
  nb=$(python3 -c 'import sys; from hybridlib.findings import chapter; print(chapter(sys.argv[1]).notebook)' "$c")
  # the runner writes a run with overrides (-p) to _build/runs/gpu, outside the book, its results beside it in
  # _build/runs/gpu/<chapter>/: collected from there too
  for f in book/gpu/"$nb" _build/runs/gpu/"$nb" data/results/"$c"/*gpu*.json _build/runs/gpu/"$c"/*gpu*.json; do
    if [ -f "$f" ] && [ "$f" -nt "$marker" ]; then mkdir -p "$OUT/$c" && cp -f "$f" "$OUT/$c/" && cp --parents -f "$f" "$KEEP"/; fi
  done
done
ls -laR "$OUT"
