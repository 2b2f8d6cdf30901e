#!/usr/bin/env bash
# Usage: curvecheck.sh KIND:SEED[:REPEAT] ... : the runs of the fast path's equivalence checks
# (hybridlib.train.equivalence: the fast curve against eager's repeats at each batch seed), 200
# steps of SmolLM2-135M each, CURVE_JOBS (default 3: ~40 GB of the GPU each) at a time, in the order given (the
# long ones first). KIND: curve (eager and fast, conv torch: the chapters' path; tag curve_s<seed>), eager (eager
# again: its repeat; eager_s<seed>_r<REPEAT>), perturbed (eager from weights perturbed at bf16 rounding, 2^-9, the
# perturbation drawn with seed REPEAT: perturbed_s<seed>_r<REPEAT>, the rounding null) or firststep:PRECISION (first_step_probe of fused, compiled and fast: first_step_<PRECISION>). After install.sh site + assets and env.sh sourced; start it detached (setsid ... &) and keep a
# call in flight. Each JSON (--results-dir) and log is written straight into $CURVE_OUT (default /tmp/gpu-out), outside
# the checkout: a JSON written into the tree was deleted on 2026-12-02 by a call's working-tree copy that began as
# the run ended, before it could be copied out.
set -uo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first}"
export CURVE_OUT=${CURVE_OUT:-/tmp/gpu-out}
mkdir -p "$CURVE_OUT"
one() {
  local kind seed rep args steps=(--curve-steps 200)
  IFS=: read -r kind seed rep <<< "$1"
  case $kind in
    curve) args=(--variants fast) ;;
    eager) args=(--variants eager) ;;
    perturbed) args=(--variants eager --perturb-weights 0.001953125 ${rep:+--perturb-seed "$rep"}) ;;
    firststep) args=(--variants fused compiled fast --first-step --precision "$seed"); steps=() ;;
    *) echo "curvecheck.sh: kind '$kind' of '$1' is not one of curve, eager, perturbed, firststep" >&2; return 2 ;;
  esac
  local tag="${kind}_s$seed${rep:+_r$rep}"
  [ "$kind" = firststep ] && { tag="first_step_$seed"; seed=0; }
  echo "$(date +%T) start $tag" >> "$CURVE_OUT/curvecheck-log.txt"
  python3 -m benchmarks.distill_step --teacher smollm2-135m --steps 0 "${steps[@]}" --seed "$seed" \
    --tag "$tag" --results-dir "$CURVE_OUT" "${args[@]}" > "$CURVE_OUT/$tag.log" 2>&1
  local rc=$?  # before $(date), which would set $? to its own status
  echo "$(date +%T) rc $rc $tag" >> "$CURVE_OUT/curvecheck-log.txt"
}
export -f one
printf '%s\n' "$@" | xargs -P "${CURVE_JOBS:-3}" -I{} bash -c 'one {}'
echo "$(date +%T) curvecheck done" >> "$CURVE_OUT/curvecheck-log.txt"
