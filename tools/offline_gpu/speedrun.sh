#!/usr/bin/env bash
# Usage: speedrun.sh : issue 19's step timings of 2026-12-02, one after another on the GPU to itself (after install.sh
# site + assets and env.sh sourced; start it detached, setsid ... &, and keep a call in flight):
#   1. the fast SmolLM2-135M step (fla convolution, batch 32 x 512) with inductor's coordinate-descent tuning of its
#      fused kernels (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1; tag tuned_fla_alone), against 83.3 ms untuned;
#   2. the first-update probe (`--first-step`, variants fused and compiled; tag first_step);
#   3. the fast Gemma 3 270M step, tuned if 1. beat the untuned step (tag gemma3_fla_alone).
# Each JSON goes flat into $OUT (default /tmp/gpu-out, outside the tree: a later call's working-tree copy deletes
# untracked files in it) as soon as it is written; the log to $OUT/speedrun-log.txt.
set -uo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first}"
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
log="$OUT/speedrun-log.txt"
results=data/results/layout_distillation
bench=(-m hybridlib.findings.layout.bench --conv-impl fla)
keep() { cp -f "$results"/step_profile_cuda_*.json "$OUT"/ 2>/dev/null; }
run() { echo "$(date +%T) $*" | tee -a "$log"; "$@" >> "$log" 2>&1; echo "$(date +%T) rc $?" | tee -a "$log"; keep; }
tuning=TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1
run env "$tuning" python3 "${bench[@]}" --teacher smollm2-135m --variants fast --tag tuned_fla_alone
run python3 -m hybridlib.findings.layout.bench --teacher smollm2-135m --variants fused compiled --steps 0 \
  --first-step --tag first_step
tuned_ms=$(python3 -c "import json; print(json.load(open('$OUT/step_profile_cuda_tuned_fla_alone.json'))['rows'][0]['step_ms'])" 2>/dev/null || echo 1e9)
if python3 -c "import sys; sys.exit(0 if float('$tuned_ms') < 83.32 else 1)"; then
  echo "$(date +%T) tuned step ${tuned_ms} ms < 83.32: Gemma 3 tuned" | tee -a "$log"
  run env "$tuning" python3 "${bench[@]}" --teacher gemma3-270m --variants fast --tag gemma3_fla_alone
else
  echo "$(date +%T) tuned step ${tuned_ms} ms: Gemma 3 untuned" | tee -a "$log"
  run python3 "${bench[@]}" --teacher gemma3-270m --variants fast --tag gemma3_fla_alone
fi
echo "$(date +%T) speedrun done" | tee -a "$log"
