#!/usr/bin/env bash
# Usage: replicated.sh SECONDS PLAN [GPU1_COMMAND] : the layout chapter's replicated students on two GPUs, then
# the chapters that read them, in the background (setsid), each GPU its own queue (logs /tmp/queue-0.log,
# /tmp/queue-1.log). Each GPU compiles only the layouts it trains. PLAN:
#   layout  GPU 0: the arms SoftCKA / first-FA probe (3 replicates each), scored; the lr check of replicates 0
#                  and 1; then the softcka and first_fa notebooks.
#           GPU 1: the other FA-first arms, scored; the second teacher's two students and the lr check of
#                  replicate 2; then the layout_distillation notebook (everything cached: it trains nothing).
#           Both wait for each other's arms before the steps that choose the best FA-first layout, and the
#           layout notebook waits for GPU 0's lr check (else it would train the same students beside it).
#   probes  the four arms SoftCKA and first-FA probe, two per GPU; then GPU 0 runs the softcka and first_fa
#           notebooks (first-FA reuses SoftCKA's measurements) and GPU 1 runs GPU1_COMMAND, if given (e.g.
#           "bash tools/offline_gpu/chapter.sh 1500 efficiency"), from its own copy of the tree.
#   first_fa the same four arms, then the SoftCKA measurements the first-FA notebook makes, split over the GPUs
#           (softcka.prealign; replicates only where the first FA layer follows recurrent layers, as the notebook
#           measures them): GPU 0 the teacher and standard periodic x 3; GPU 1 reverse periodic and
#           periodic-first-at-0, then (once GPU 0 has trained it) the SWA control x 3. GPU 0 then runs the
#           first_fa notebook, which finds every measurement in the shared cache; GPU 1 runs GPU1_COMMAND.
# Run after install.sh (both parts) with HYBRIDLIB_GIT_COMMIT exported and each teacher loaded once (two
# processes converting the same GGUF would race on its folder). collect.sh packs the results.
set -euo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: the notebooks record it}"
limit=${1:?usage: replicated.sh SECONDS layout|probes|first_fa [GPU1_COMMAND]}
rep="python3 -m hybridlib.findings.layout.replicates --preset gpu"
wait_both='while [ ! -f /tmp/arms-0.done ] || [ ! -f /tmp/arms-1.done ]; do sleep 5; done'
probes="OUT=/tmp/gpu-out/softcka-first_fa bash tools/offline_gpu/chapter.sh $limit softcka first_fa"
pre="python3 -m hybridlib.findings.softcka.prealign --preset gpu --chapter first_fa"
case ${2:-} in
  layout)
    plan0="$rep --score --arms standard_periodic reverse_periodic periodic_first_at_0 standard_periodic+swa && \
touch /tmp/arms-0.done && $wait_both && $rep --score --lr-check --replicates 0 1 && touch /tmp/lr-0.done && $probes"
    plan1="$rep --score --arms sandwich interleaved_sandwich endpoint_spread && touch /tmp/arms-1.done && \
$wait_both && $rep --score --other-teachers && $rep --score --lr-check --replicates 2 && \
while [ ! -f /tmp/lr-0.done ]; do sleep 5; done && \
OUT=/tmp/gpu-out/layout_distillation bash tools/offline_gpu/chapter.sh $limit layout_distillation" ;;
  probes)
    plan0="$rep --arms standard_periodic standard_periodic+swa && touch /tmp/arms-0.done && $wait_both && $probes"
    plan1="$rep --arms reverse_periodic periodic_first_at_0 && touch /tmp/arms-1.done && ${3:-true}" ;;
  first_fa)
    plan0="$rep --arms standard_periodic standard_periodic+swa && touch /tmp/trained-0 && $pre --teacher \
--layouts standard_periodic --replicates && touch /tmp/arms-0.done && $wait_both && \
OUT=/tmp/gpu-out/first_fa bash tools/offline_gpu/chapter.sh $limit first_fa"
    plan1="$rep --arms reverse_periodic periodic_first_at_0 && $pre --layouts reverse_periodic periodic_first_at_0 && \
while [ ! -f /tmp/trained-0 ]; do sleep 5; done && $pre --swa --replicates && touch /tmp/arms-1.done && ${3:-true}" ;;
  *) echo "replicated.sh: PLAN must be 'layout', 'probes' or 'first_fa', got '${2:-}'" >&2; exit 2 ;;
esac
rm -f /tmp/arms-*.done /tmp/lr-0.done /tmp/trained-0
mkdir -p /tmp/gpu-out
for gpu in 0 1; do
  repo=/tmp/repo-$gpu plan=plan$gpu
  rm -rf "$repo" && mkdir -p "$repo"
  tar --exclude=./.gpu --exclude=./.venv --exclude=./.git -cf - . | tar -C "$repo" -xf -
  (cd "$repo" && source tools/offline_gpu/env.sh && CUDA_VISIBLE_DEVICES=$gpu setsid bash -c \
    "echo \$(date +%T) start; ${!plan}; echo \$(date +%T) queue done rc \$?" > "/tmp/queue-$gpu.log" 2>&1 < /dev/null &)
  echo "GPU $gpu: ${!plan}"
done
