#!/usr/bin/env bash
# Usage: campaign.sh REPLICATE... : one machine's share of the layout campaign (gpu preset), in the background
# (setsid): for each replicate in order, every arm of the layout chapter is trained, scored and measured as the
# SoftCKA and first-FA chapters will measure it (python -m hybridlib.campaign), then that replicate's new records
# (what python -m hybridlib.carry packs: run records, scores, measurements, memo; ~8 MB) go to
# /tmp/gpu-out/records-r<R>.tgz, one file a replicate within the 16 MiB a file that comes back, so a machine taken
# back mid-share loses at most the replicate under way. Run from the frozen tree (freeze.sh) after install.sh (site,
# assets, and `records` of replicate 0's archive when this share starts later), replicate 0 first.
# Log: /tmp/campaign.log.
set -euo pipefail
: "${HYBRIDLIB_GIT_COMMIT:?export HYBRIDLIB_GIT_COMMIT=<the commit this tree was sent from> first: provenance records it}"
[ $# -gt 0 ] || { echo "usage: campaign.sh REPLICATE..." >&2; exit 2; }
for r in "$@"; do [[ $r =~ ^[0-9]+$ ]] || { echo "campaign.sh: replicates are indices 0, 1, ..., got '$r'" >&2; exit 2; }; done
source tools/offline_gpu/env.sh
arms=$(python3 -c "from hybridlib.findings import chapter; from hybridlib.findings.layout import replicates as r
print(' '.join(r.plans(chapter('layout_distillation').resolve('gpu'))))")
mkdir -p /tmp/gpu-out
# the records (hybridlib.carry.RECORDS) a replicate wrote: files newer than its start, never weights or temporaries
records='cd $HYBRIDLIB_CACHE && find students alignment memo -newer /tmp/campaign.mark -type f ! -name ".*" \
\( -path "students/*/*.json" ! -path "students/*/*/*" -o -path "alignment/*.npz" -o -path "memo/*/*.pkl" \)'
share="for r in $*; do echo \$(date +%T) replicate \$r; touch /tmp/campaign.mark; python3 -m hybridlib.campaign \
--preset gpu --arms $arms --replicates \$r || exit 1; ($records) | tar -C \$HYBRIDLIB_CACHE -czf \
/tmp/gpu-out/records-r\$r.tgz -T - && ls -la /tmp/gpu-out/records-r\$r.tgz; done; echo \$(date +%T) share done"
setsid bash -c "$share" > /tmp/campaign.log 2>&1 < /dev/null &
echo "campaign: replicates $* of $arms (log /tmp/campaign.log)"
