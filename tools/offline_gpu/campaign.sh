#!/usr/bin/env bash
# Usage: campaign.sh [--tree FILE] [--slot S] [--budget N | --lr-check | --other-teachers] [--arms A,B,...]
# REPLICATE... : one machine's share of the layout campaign (gpu preset), in the background (setsid): for each
# replicate in order, every arm of the layout chapter is trained, scored and measured as the SoftCKA and first-FA
# chapters will measure it (python -m hybridlib.campaign), then that replicate's new records (what python -m
# hybridlib.carry packs: run records, scores, measurements, memo; ~5 MB) go to /tmp/gpu-out/records-r<R>.tgz, one file
# a replicate within the 16 MiB a file that comes back, so a machine taken back mid-share loses at most the replicate
# under way. Run from the frozen tree (freeze.sh) after install.sh (site, assets, and `records` of replicate 0's
# archive when this share starts later), replicate 0 first. With --tree .gpu/frozen/tree-<commit>.tar.gz the share
# runs that tree, unpacked into /tmp/tree, and records <commit>.
# --slot S (S >= 1) runs a second share beside slot 0 on the same GPU: its own tree (/tmp/tree-S), log
# (/tmp/campaign-S.log), archives (records-...-r<R>-slotS.tgz) and cache (a copy of the cache as it is when the slot
# starts, $HYBRIDLIB_CACHE-S), since a share packs the records written after its start; start slot S first, then
# slot 0, with OMP_NUM_THREADS halved; it starts training when install.sh's kernel warm-up has ended.
# --budget N (one of the gpu preset's budgets, in tokens) trains and scores the budget curve's arms at N instead (issue
# 49; --budgets N: at the largest budget the chapters' arms measured too) into /tmp/gpu-out/records-b<N>-r<R>.tgz (R:
# indices of budget_seeds).
# --arms A,B,... trains only those arms of the layout chapter (or of the budget curve at N) for each replicate, so
# the arms one rule compares can come first (the budget trend's standard and reverse periodic): a later share runs
# the rest, and its archive of a replicate takes the same name, so commit it under another.
# --lr-check trains and scores the layout chapter's learning-rate check (the baseline and the best FA-first layout at
# lr_check_factor x both learning rates; python -m hybridlib.findings.layout.replicates --lr-check) of each replicate
# into records-lr-r<R>.tgz; --other-teachers the other teachers' two students (replicate 0's seeds: give 0) into
# records-teachers-r0.tgz. Both choose the best FA-first layout from every replicate of the FA-first arms, so they
# refuse to start, naming the student, unless the cache holds all of those (install their archives first).
# Log: /tmp/campaign.log.
set -euo pipefail
tree= slot=0 budget= arms= check=
while [ $# -gt 0 ]; do
  case $1 in
    --tree)
      tree=$(realpath -m "${2-x}"); shift $(($# > 1 ? 2 : 1))
      [[ $(basename "$tree") =~ ^tree-([0-9a-f]{40})\.tar\.gz$ ]] && [ -f "$tree" ] || {
        echo "campaign.sh: --tree must name a file tree-<40-hex commit>.tar.gz written by freeze.sh, got '$tree'" >&2; exit 2; }
      export HYBRIDLIB_GIT_COMMIT=${BASH_REMATCH[1]} ;;
    --slot)
      slot=${2-}; shift $(($# > 1 ? 2 : 1))
      [[ $slot =~ ^[0-9]+$ ]] || { echo "campaign.sh: --slot takes a share index 0, 1, ..., got '$slot'" >&2; exit 2; } ;;
    --budget)
      budget=${2-}; shift $(($# > 1 ? 2 : 1))
      [[ $budget =~ ^[1-9][0-9]*$ ]] || { echo "campaign.sh: --budget takes a positive number of tokens" \
        "(one of the gpu preset's budgets), got '$budget'" >&2; exit 2; } ;;
    --arms)
      arms=${2-}; shift $(($# > 1 ? 2 : 1))
      # only the separators here; the labels are checked against the chapter's plan below
      [[ $arms =~ ^[^,[:space:]]+(,[^,[:space:]]+)*$ ]] || { echo "campaign.sh: --arms takes arm labels" \
        "separated by commas (e.g. standard_periodic,reverse_periodic), got '$arms'" >&2; exit 2; } ;;
    --lr-check|--other-teachers)
      [ -z "$check" ] || [ "$check" = "${1#--}" ] || { echo "campaign.sh: --lr-check and --other-teachers are" \
        "two shares: give one" >&2; exit 2; }
      check=${1#--}; shift ;;
    --*) echo "campaign.sh: unknown option '$1' (allowed: --tree FILE, --slot S, --budget N, --lr-check," \
      "--other-teachers, --arms A,B,...)" >&2; exit 2 ;;
    *) break ;;
  esac
done
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: provenance records it}"
[ $# -gt 0 ] || { echo "usage: campaign.sh [--tree FILE] [--slot S] [--budget N | --lr-check | --other-teachers]" \
  "[--arms A,B,...] REPLICATE..." >&2; exit 2; }
for r in "$@"; do [[ $r =~ ^[0-9]+$ ]] || { echo "campaign.sh: replicates are indices 0, 1, ..., got '$r'" >&2; exit 2; }; done
if [ -n "$check" ]; then
  [ -z "$budget$arms" ] || { echo "campaign.sh: --$check trains its own arms: not with --budget or --arms" >&2; exit 2; }
  [ "$check" != other-teachers ] || [ "$*" = 0 ] || { echo "campaign.sh: --other-teachers trains two students" \
    "with replicate 0's seeds: give replicate 0, got '$*'" >&2; exit 2; }
fi
own=$([ "$slot" -eq 0 ] || echo "-$slot")
if [ -n "$tree" ]; then rm -rf /tmp/tree"$own" && mkdir -p /tmp/tree"$own" && tar -C /tmp/tree"$own" -xzf "$tree" && cd /tmp/tree"$own"; fi
source tools/offline_gpu/env.sh
# the arms of this share's plan (the layout chapter's, or the budget curve's at N), before anything is copied or run
plan=$(python3 -c "import sys
from hybridlib.findings import chapter; from hybridlib.findings.layout import replicates as r
p = chapter('layout_distillation').resolve('gpu')
print(' '.join(r.budget_plans(p, int(sys.argv[1])) if sys.argv[1] else r.plans(p)))" "$budget")
arms=${arms//,/ } where=$([ -n "$budget" ] && echo "budget curve at $budget tokens" || echo "layout chapter")
for a in $arms; do
  [[ " $plan " == *" $a "* ]] || { echo "campaign.sh: --arms: '$a' is not an arm of the gpu preset's $where;" \
    "allowed: $plan" >&2; exit 2; }
done
if [ -n "$check" ]; then  # the best FA-first layout over every replicate, from the records alone (trains nothing)
  best=$(HYBRIDLIB_RECORDS_ONLY=1 python3 -c "from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates as r
p = chapter('layout_distillation').resolve('gpu')
print(r.best_fa_first(r.train(p, labels=r.FA_FIRST, progress=False)))" 2>&1 | tail -n 1) || {
    echo "campaign.sh: --$check picks the best FA-first layout from all its replicates, and the cache lacks one:" \
      "$best" >&2; exit 2; }
fi
if [ -n "$own" ]; then  # a copy, not hard links: save_pretrained writes a student's weights in place, into files
  # a link would share with slot 0's cache; copy-on-write (reflink) where the filesystem can; copied under a
  # temporary name and renamed when whole, so a copy cut short is made again, never taken for the slot's cache
  if [ ! -d "$HYBRIDLIB_CACHE$own" ]; then
    rm -rf "$HYBRIDLIB_CACHE$own.partial"
    cp -a --reflink=auto "$HYBRIDLIB_CACHE" "$HYBRIDLIB_CACHE$own.partial"
    mv "$HYBRIDLIB_CACHE$own.partial" "$HYBRIDLIB_CACHE$own"
  fi
  export HYBRIDLIB_CACHE=$HYBRIDLIB_CACHE$own
fi
if [ -n "$check" ]; then
  name=records-$([ "$check" = lr-check ] && echo lr || echo teachers)-r what="the $check (best FA-first: $best)"
elif [ -n "$budget" ]; then  # every arm of the budget curve at that budget, or those --arms names
  work="--budgets $budget${arms:+ --arms $arms}" name=records-b$budget-r what="budget $budget${arms:+ ($arms)}"
else
  work="--arms ${arms:-$plan}" name=records-r what=${arms:-$plan}
fi
mkdir -p /tmp/gpu-out
mark=/tmp/campaign$own.mark
# each replicate's records (what it wrote since its start, never weights), packed after each finished arm into
# <name><R>[-slot<S>]-partial.tgz (never a student without its measurements), renamed <name><R>[-slot<S>].tgz when
# all are done; a second share's archives name its slot, so two shares may train other arms of the same replicate
at=${own:+-slot$slot}
# a second share waits for install.sh's kernel warm-up (its pid in $WARM_PID) to end: two 16M-token shares take
# 73.5 GiB of an H100's 79.2, and the warm-up's 5.3 GiB beside them ran one out of memory
warm=${WARM_PID:-/tmp/warm.pid}
wait=$([ -z "$own" ] || echo "pid=\$(cat $warm 2>/dev/null || true); if grep -qs warm.py /proc/\$pid/cmdline; then \
echo \$(date +%T) waiting for the kernel warm-up, pid \$pid, to end; \
while grep -qs warm.py /proc/\$pid/cmdline; do sleep 2; done; fi; ")
partial="/tmp/gpu-out/$name\$r$at-partial.tgz"
if [ -n "$check" ]; then  # trained and scored, then what it wrote packed (carry: nothing new when all was carried)
  step="python3 -m hybridlib.findings.layout.replicates --preset gpu --$check --replicates \$r --score \
&& { python3 -m hybridlib.carry pack --newer $mark $partial 2> $mark.err || grep -q 'no records newer than' $mark.err \
|| { cat $mark.err; false; }; }"
else
  step="python3 -m hybridlib.campaign --preset gpu $work --replicates \$r --newer $mark --pack $partial"
fi
share="${wait}for r in $*; do echo \$(date +%T) replicate \$r; touch $mark; \
$step || { echo \$(date +%T) share failed; exit 1; }; \
if [ -f $partial ]; then mv $partial ${partial%-partial.tgz}.tgz && ls -la ${partial%-partial.tgz}.tgz; \
else echo replicate \$r: every record found, nothing new; fi; done; \
echo \$(date +%T) share done"
setsid bash -c "$share" > /tmp/campaign"$own".log 2>&1 < /dev/null &
echo "campaign: replicates $* of $what (log /tmp/campaign$own.log, cache $HYBRIDLIB_CACHE)"
