#!/usr/bin/env bash
# Usage: campaign.sh [--tree FILE] [--slot S] REPLICATE... : one machine's share of the layout campaign (gpu preset), in
# the background (setsid): for each replicate in order, every arm of the layout chapter is trained, scored and measured
# as the SoftCKA and first-FA chapters will measure it (python -m hybridlib.campaign), then that replicate's new records
# (what python -m hybridlib.carry packs: run records, scores, measurements, memo; ~5 MB) go to
# /tmp/gpu-out/records-r<R>.tgz, one file a replicate within the 16 MiB a file that comes back, so a machine taken
# back mid-share loses at most the replicate under way. Run from the frozen tree (freeze.sh) after install.sh (site,
# assets, and `records` of replicate 0's archive when this share starts later), replicate 0 first. With --tree
# .gpu/frozen/tree-<commit>.tar.gz the share runs that tree, unpacked into /tmp/tree, and records <commit>.
# --slot S (S >= 1) runs a second share beside slot 0 on the same GPU: its own tree (/tmp/tree-S), log
# (/tmp/campaign-S.log) and cache (a copy of the cache as it is when the slot starts, $HYBRIDLIB_CACHE-S), since a
# share packs the records written after its start; start slot S first, then slot 0, with OMP_NUM_THREADS halved.
# Log: /tmp/campaign.log.
set -euo pipefail
tree= slot=0
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
    --*) echo "campaign.sh: unknown option '$1' (allowed: --tree FILE, --slot S)" >&2; exit 2 ;;
    *) break ;;
  esac
done
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: provenance records it}"
[ $# -gt 0 ] || { echo "usage: campaign.sh [--tree FILE] [--slot S] REPLICATE..." >&2; exit 2; }
for r in "$@"; do [[ $r =~ ^[0-9]+$ ]] || { echo "campaign.sh: replicates are indices 0, 1, ..., got '$r'" >&2; exit 2; }; done
own=$([ "$slot" -eq 0 ] || echo "-$slot")
if [ -n "$tree" ]; then rm -rf /tmp/tree"$own" && mkdir -p /tmp/tree"$own" && tar -C /tmp/tree"$own" -xzf "$tree" && cd /tmp/tree"$own"; fi
source tools/offline_gpu/env.sh
if [ -n "$own" ]; then
  [ -d "$HYBRIDLIB_CACHE$own" ] || cp -a "$HYBRIDLIB_CACHE" "$HYBRIDLIB_CACHE$own"
  export HYBRIDLIB_CACHE=$HYBRIDLIB_CACHE$own
fi
arms=$(python3 -c "from hybridlib.findings import chapter; from hybridlib.findings.layout import replicates as r
print(' '.join(r.plans(chapter('layout_distillation').resolve('gpu'))))")
mkdir -p /tmp/gpu-out
mark=/tmp/campaign$own.mark
# each replicate's records (what it wrote since its start, never weights), packed after each finished arm into
# records-r<R>-partial.tgz (never a student without its measurements), renamed records-r<R>.tgz when all are done
share="for r in $*; do echo \$(date +%T) replicate \$r; touch $mark; \
python3 -m hybridlib.campaign --preset gpu --arms $arms --replicates \$r --newer $mark \
--pack /tmp/gpu-out/records-r\$r-partial.tgz || exit 1; mv /tmp/gpu-out/records-r\$r-partial.tgz \
/tmp/gpu-out/records-r\$r.tgz && ls -la /tmp/gpu-out/records-r\$r.tgz; done; \
echo \$(date +%T) share done"
setsid bash -c "$share" > /tmp/campaign"$own".log 2>&1 < /dev/null &
echo "campaign: replicates $* of $arms (log /tmp/campaign$own.log, cache $HYBRIDLIB_CACHE)"
