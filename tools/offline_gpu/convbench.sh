#!/usr/bin/env bash
# Usage: convbench.sh : issue 19's measurement of fla's short convolution on the GPU that CUDA_VISIBLE_DEVICES names,
# after install.sh site + assets and env.sh sourced; start it detached (setsid ... &) and keep a call in flight.
# The CUDA tests of the fla path, then the fast SmolLM2-135M step (real teacher, batch 32 x 512) with the compiled
# shifted-sum convolution, with fla's Triton kernels and with fla's Gluon kernels, each timed under the same load
# and its 200-step loss curve set against the eager one; then, once the GPU runs nothing else (another chapter beside
# it has finished; at most ALONE_WAIT_S seconds, default 1200, 0 skips it), the torch and fla steps timed again
# alone (tags conv_torch_alone, conv_fla_alone: the faster path becomes the default only on these). Every
# step_profile_cuda_conv_*.json goes flat into $OUT as soon as it is written; the log to $OUT/convbench-log.txt.
set -uo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first}"
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
log="$OUT/convbench-log.txt"
step=(-m benchmarks.distill_step --teacher smollm2-135m --variants fast)  # timed and profiled
bench=("${step[@]}" --curve-steps 200)  # and its loss curve against eager
keep() { cp -f _build/bench/step_profile_cuda_conv_*.json "$OUT"/ 2>/dev/null; }
run() { echo "$(date +%T) $*" | tee -a "$log"; "$@" >> "$log" 2>&1; local rc=$?; echo "$(date +%T) rc $rc" | tee -a "$log"; keep; }
run python3 -m pytest -q -p no:cacheprovider tests/gpu/test_fast_distill_gpu.py
run python3 "${bench[@]}" --conv-impl torch --tag conv_torch
run python3 "${bench[@]}" --conv-impl fla --tag conv_fla
run env FLA_CONV_GLUON=1 python3 "${bench[@]}" --conv-impl fla --tag conv_fla_gluon
gpu=${CUDA_VISIBLE_DEVICES:-0}; waited=0; wait_s=${ALONE_WAIT_S:-1200}
busy() { [ -n "$(nvidia-smi -i "${gpu%%,*}" --query-compute-apps=pid --format=csv,noheader)" ]; }
while busy && [ "$waited" -lt "$wait_s" ]; do sleep 10; waited=$((waited + 10)); done
if [ "$wait_s" -gt 0 ] && ! busy; then
  echo "$(date +%T) the GPU to itself after ${waited} s: the timings alone" | tee -a "$log"
  run python3 "${step[@]}" --conv-impl torch --tag conv_torch_alone
  run python3 "${step[@]}" --conv-impl fla --tag conv_fla_alone
else
  echo "$(date +%T) the GPU stayed shared (or ALONE_WAIT_S=0): no timings alone" | tee -a "$log"
fi
echo "$(date +%T) convbench done" | tee -a "$log"
grep -v "it/s\]" "$log" | grep "^{'\|rc \|passed\|failed" | tail -n 20
