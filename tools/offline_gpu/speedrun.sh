#!/usr/bin/env bash
# Usage: speedrun.sh [TAG_PREFIX [BENCH_ARGS...]] : issue 19's step timings, one after another on the GPU to itself (after install.sh
# site + assets and env.sh sourced; start it detached, setsid ... &, and keep a call in flight): the fast SmolLM2-135M
# step, then the fast Gemma 3 270M step (fla's convolution forward with our one-pass backward, `--conv-impl
# fla_onepass`; batch 32 x 512; tags <prefix>fla_alone and gemma3_<prefix>fla_alone). SPEEDRUN_TUNED=1 adds
# inductor's coordinate-descent tuning of the fused kernels (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1: about 3 more
# minutes of compiling a student); SPEEDRUN_GEMMS=1 lets inductor time its Triton GEMM templates against cuBLAS for
# each matmul (TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1).
# Each JSON is written straight into $SPEEDRUN_OUT (--results-dir; default /tmp/gpu-out: outside the tree, whose
# untracked files a later call's working-tree copy deletes, and not the call's own $OUT, emptied by the next call).
# BENCH_ARGS go to every bench call (e.g. --sdpa-layout contiguous, or --conv-impl fla: fla's own backward, the last
# one wins); SPEEDRUN_TEACHERS picks the teachers (default "smollm2-135m gemma3-270m").
set -uo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first}"
prefix=${1:-}
shift $(( $# > 0 ))
out=${SPEEDRUN_OUT:-/tmp/gpu-out}; mkdir -p "$out"
log="$out/speedrun-log.txt"
run() { echo "$(date +%T) $*" | tee -a "$log"; "$@" >> "$log" 2>&1; local rc=$?; echo "$(date +%T) rc $rc" | tee -a "$log"; }
tuning=()
[ "${SPEEDRUN_TUNED:-0}" = 1 ] && tuning=(TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1)
[ "${SPEEDRUN_GEMMS:-0}" = 1 ] && tuning+=(TORCHINDUCTOR_MAX_AUTOTUNE_GEMM=1)
bench=(-m benchmarks.distill_step --conv-impl fla_onepass --variants fast --results-dir "$out" "$@")
for teacher in ${SPEEDRUN_TEACHERS:-smollm2-135m gemma3-270m}; do
  tag=$([ "$teacher" = smollm2-135m ] || echo "${teacher%%-*}_")"${prefix}fla_alone"
  run env "${tuning[@]}" python3 "${bench[@]}" --teacher "$teacher" --tag "$tag"
done
echo "$(date +%T) speedrun done" | tee -a "$log"
