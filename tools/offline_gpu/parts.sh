#!/usr/bin/env bash
# Usage: parts.sh : split pack.sh's four payload files into the parts that back-to-back `run` calls upload, one a
# call (64 MiB per call, the working tree included): one tar, site and wheels first (so the second call can install
# them while the rest uploads), cut into parts .gpu/stage-K/pchunk.K that leave room for the working tree and the
# frozen trees the last call carries (64 MiB less both, less 2 MiB), its sha256 in .gpu/stage-<last>/. Records
# archives staged in .gpu/records/ (light.sh on) travel with the first call and the last installs them.
# Prints each call's command and carry; refuses when a call would exceed 64 MiB. Run from the checkout after pack.sh
# and freeze.sh.
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
payload=.gpu/payload
for f in site.tar.xz wheels.tar cache.tar.xz pkgs.tar; do
  [ -f "$payload/$f" ] || { echo "parts.sh: $payload/$f missing: run tools/offline_gpu/pack.sh FLA_BUNDLE first" >&2; exit 2; }
done
rm -rf .gpu/stage-* .gpu/pchunk.*
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- | tail -1 | cut -f1)
frozen=$(du -cb .gpu/frozen 2>/dev/null | tail -1 | cut -f1)  # the last call carries .gpu/frozen too
records= held=0  # archives light.sh staged: the first call carries .gpu/records
for f in .gpu/records/*.tgz; do
  if [ -f "$f" ]; then records+=" $(basename "$f")" held=$((held + $(stat -c %s "$f"))); fi
done
beside=.gpu/frozen extra=$frozen  # the larger of what the last and the first call carry besides a part
[ "$held" -le "$frozen" ] || beside=.gpu/records extra=$held
part=$(( (64 - 2 - ((tree + extra) >> 20) - 1) << 20 ))
[ "$part" -gt 0 ] || { echo "parts.sh: the working tree ($((tree >> 20)) MiB) and $beside ($((extra >> 20)) MiB) leave no room in a 64 MiB call" >&2; exit 2; }
tar -C "$payload" -cf .gpu/payload.tar site.tar.xz wheels.tar cache.tar.xz pkgs.tar
first=$(( ($(stat -c %s "$payload/site.tar.xz") + $(stat -c %s "$payload/wheels.tar") + 4096) / part + 1 ))  # + tar headers
split -b "$part" -d -a 3 .gpu/payload.tar .gpu/pchunk.
n=$(ls .gpu/pchunk.* | wc -l); last=$((n - 1))
for k in $(seq 0 "$last"); do mkdir -p .gpu/stage-"$k" && mv .gpu/pchunk."$(printf %03d "$k")" .gpu/stage-"$k"/pchunk."$k"; done
sha256sum .gpu/payload.tar | cut -c1-64 > .gpu/stage-"$last"/payload.sha
rm .gpu/payload.tar
for k in $(seq 0 "$last"); do  # what each call uploads: its part, the working tree, the last also .gpu/frozen, the first .gpu/records
  call=$(( $(du -cb .gpu/stage-"$k" | tail -1 | cut -f1) + tree + (k == last ? frozen : 0) + (k == 0 ? held : 0) ))
  [ "$call" -le $((64 << 20)) ] || { echo "parts.sh: call $k would upload $((call >> 20)) MiB > 64 MiB" >&2; exit 2; }
done
chunks=$(seq -s ' ' -f 'pchunk.%g' 0 "$last")
# convert each packed teacher once before parallel runs (a pack.sh --campaign payload holds SmolLM2 only)
loads="load('smollm2-135m')"; tar -tf "$payload/pkgs.tar" | grep -q '^gemma3_270m' && loads+="; load('gemma3-270m')"
site_chunks=$(seq -s ' ' -f 'pchunk.%g' 0 $((first - 1)))
echo "$n parts of $((part >> 20)) MiB (working tree $((tree >> 20)) MiB; site and wheels in the first $first). One run call each, at once after the last returns:"
for k in $(seq 0 "$last"); do
  more= staged=
  [ "$k" -ne "$last" ] || more+=', ".gpu/frozen"'
  if [ "$k" -eq 0 ] && [ -n "$records" ]; then more+=', ".gpu/records"' staged=' .gpu/records/*'; fi
  cmd="mkdir -p /tmp/stage && cp .gpu/stage-$k/*$staged /tmp/stage/"
  if [ "$k" -eq $((first - 1)) ]; then
    cmd+=" && (cd /tmp/stage && cat $site_chunks | tar --occurrence=1 -x site.tar.xz wheels.tar)"
    cmd+=" && bash tools/offline_gpu/install.sh site /tmp/stage"
  fi
  if [ "$k" -eq "$last" ]; then
    cmd+=" && (cd /tmp/stage && cat $chunks > payload.tar && echo \"\$(cat payload.sha)  payload.tar\" | sha256sum -c"
    cmd+=" && tar -xf payload.tar cache.tar.xz pkgs.tar && rm -f pchunk.* payload.tar)"
    cmd+=" && bash tools/offline_gpu/install.sh assets /tmp/stage && source tools/offline_gpu/env.sh"
    cmd+=" && python3 -c \"from hybridlib.models import load; $loads\""
    for r in $records; do cmd+=" && bash tools/offline_gpu/install.sh records /tmp/stage/$r"; done
    cmd+="; ..."
  fi
  echo "  carry [\".gpu/stage-$k\"$more]: $cmd"
done
