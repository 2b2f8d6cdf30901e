#!/usr/bin/env bash
# Usage: scaling.sh : issue 19 Part B on a machine with 2 GPUs, after install.sh site + assets and env.sh sourced.
# The distillation trainer (distill_step --train-steps, real SmolLM2-135M teacher, batch 32 x 512 global, 60 steps) on
# one GPU twice (the run-to-run noise) and on two under torchrun with DDP and with FSDP (tokens/s, loss curves);
# then a checkpoint written on 2 GPUs (stopped at step 30) resumed on 1, and one written on 1 resumed on 2. Every
# step_profile_cuda_train*.json goes flat into $OUT as soon as it is written; the log to $OUT/scaling-log.txt.
set -uo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first}"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off (KINDS.md)
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
log="$OUT/scaling-log.txt"
bench=(-m benchmarks.distill_step --teacher smollm2-135m --train-steps 60)
two=(torchrun --standalone --nproc-per-node 2)
keep() { cp -f _build/bench/step_profile_cuda_train*.json "$OUT"/ 2>/dev/null; }
run() { echo "$(date +%T) $*" | tee -a "$log"; "$@" >> "$log" 2>&1; local rc=$?; echo "$(date +%T) rc $rc" | tee -a "$log"; keep; }
run env CUDA_VISIBLE_DEVICES=0 python3 "${bench[@]}" --no-cuda-graphs --tag train1
run env CUDA_VISIBLE_DEVICES=0 python3 "${bench[@]}" --no-cuda-graphs --tag train1_repeat
run "${two[@]}" "${bench[@]}" --tag train2
run "${two[@]}" "${bench[@]}" --strategy fsdp --tag train2_fsdp
rm -rf /tmp/ck21 /tmp/ck12
run "${two[@]}" "${bench[@]}" --out-dir /tmp/ck21 --stop-at 30
run env CUDA_VISIBLE_DEVICES=0 python3 "${bench[@]}" --no-cuda-graphs --out-dir /tmp/ck21 --tag train2to1
run env CUDA_VISIBLE_DEVICES=0 python3 "${bench[@]}" --no-cuda-graphs --out-dir /tmp/ck12 --stop-at 30
run "${two[@]}" "${bench[@]}" --out-dir /tmp/ck12 --tag train1to2
grep -v "it/s\]" "$log" | grep "^{'\|rc " | tail -n 20
