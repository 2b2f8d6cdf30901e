#!/usr/bin/env bash
# Usage: replicated.sh SECONDS : the layout chapter's replicated students on two GPUs, then the chapters that read
# them, in the background (setsid), each GPU its own queue (logs /tmp/queue-0.log, /tmp/queue-1.log):
#   GPU 0: the arms SoftCKA / first-FA probe (3 replicates each), scored; then the lr check of replicates 0 and 1;
#          then the softcka and first_fa notebooks.
#   GPU 1: the other FA-first arms, scored; then the second teacher's two students and the lr check of
#          replicate 2; then the layout_distillation notebook (everything cached: it trains nothing).
# Both wait for each other's arms before the steps that choose the best FA-first layout, and the layout notebook
# waits for GPU 0's lr check (else it would train the same students again beside it). Each GPU compiles only
# the layouts it trains. Run after install.sh (both parts) with HYBRIDLIB_GIT_COMMIT exported and each teacher
# loaded once (two processes converting the same GGUF would race on its folder). collect.sh packs the results.
set -euo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: the notebooks record it}"
limit=${1:?usage: replicated.sh SECONDS}
rep="python3 -m hybridlib.findings.layout.replicates --preset gpu --score"
arms0="standard_periodic reverse_periodic periodic_first_at_0 standard_periodic+swa"
arms1="sandwich interleaved_sandwich endpoint_spread"
wait_both='while [ ! -f /tmp/arms-0.done ] || [ ! -f /tmp/arms-1.done ]; do sleep 5; done'
plan0="$rep --arms $arms0 && touch /tmp/arms-0.done && $wait_both && $rep --lr-check --replicates 0 1 && \
touch /tmp/lr-0.done && OUT=/tmp/gpu-out/softcka-first_fa bash tools/offline_gpu/chapter.sh $limit softcka first_fa"
plan1="$rep --arms $arms1 && touch /tmp/arms-1.done && $wait_both && $rep --other-teachers && \
$rep --lr-check --replicates 2 && \
while [ ! -f /tmp/lr-0.done ]; do sleep 5; done && OUT=/tmp/gpu-out/layout_distillation bash tools/offline_gpu/chapter.sh $limit layout_distillation"
rm -f /tmp/arms-*.done /tmp/lr-0.done
mkdir -p /tmp/gpu-out
for gpu in 0 1; do
  repo=/tmp/repo-$gpu plan=plan$gpu
  rm -rf "$repo" && mkdir -p "$repo"
  tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C "$repo" -xf -
  (cd "$repo" && source tools/offline_gpu/env.sh && CUDA_VISIBLE_DEVICES=$gpu setsid bash -c \
    "echo \$(date +%T) start; ${!plan}; echo \$(date +%T) queue done rc \$?" > "/tmp/queue-$gpu.log" 2>&1 < /dev/null &)
  echo "GPU $gpu: ${!plan}"
done
