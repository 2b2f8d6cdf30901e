#!/usr/bin/env bash
# The GPU kernels one machine compiled (TileLang's cache, ${TILELANG_CACHE_DIR:-~/.tilelang/cache}; Triton's,
# ${TRITON_CACHE_DIR:-~/.triton/cache}), kept for the next machine: both key an entry by the kernel's source, the
# compiler's version and the target, so an H100's serve an H200 and a stale entry is only a miss.
#   kernels.sh pack     on the GPU machine once install.sh's warm-up has ended: both caches into
#                       $OUT/kernel-caches.tgz (folders tilelang/ and triton/); Triton's is left out when the archive
#                       would pass the $KERNELS_MAX_MIB (default 16) a file that comes back may hold
#   kernels.sh restore FILE  an archive of `pack` into the two caches (install.sh site does it before its warm-up
#                       when data/gpu_memo/kernel-caches.tgz is committed)
set -euo pipefail
tilelang=${TILELANG_CACHE_DIR:-$HOME/.tilelang/cache}
triton=${TRITON_CACHE_DIR:-$HOME/.triton/cache}
case ${1-} in
  pack)
    max=${KERNELS_MAX_MIB:-16}
    [[ $max =~ ^[1-9][0-9]*$ ]] || { echo "kernels.sh: KERNELS_MAX_MIB takes whole MiB >= 1, got '$max'" >&2; exit 2; }
    pid=$(cat "${WARM_PID:-/tmp/warm.pid}" 2>/dev/null || true)
    if [ -n "$pid" ] && grep -qs warm.py "/proc/$pid/cmdline"; then
      echo "kernels.sh: the kernel warm-up (pid $pid) is still compiling: pack when it has ended" >&2; exit 2
    fi
    [ -d "$tilelang" ] || [ -d "$triton" ] || {
      echo "kernels.sh: nothing compiled: neither $tilelang nor $triton exists" >&2; exit 2; }
    stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
    mkdir "$stage/tilelang" "$stage/triton"
    [ -d "$tilelang" ] && cp -a "$tilelang/." "$stage/tilelang/"
    [ -d "$triton" ] && cp -a "$triton/." "$stage/triton/"
    rm -rf "$stage"/tilelang/*/.staging  # <version>/.staging: saves a crash cut short
    out=${OUT:-.}/kernel-caches.tgz
    tar -C "$stage" -czf "$out.tmp" tilelang triton
    if [ "$(stat -c %s "$out.tmp")" -gt $((max << 20)) ]; then
      echo "kernels.sh: with Triton's cache the archive holds $(($(stat -c %s "$out.tmp") >> 20)) MiB > $max MiB: TileLang's alone"
      tar -C "$stage" -czf "$out.tmp" tilelang
      [ "$(stat -c %s "$out.tmp")" -le $((max << 20)) ] || {
        rm -f "$out.tmp"; echo "kernels.sh: TileLang's cache alone passes $max MiB: nothing packed" >&2; exit 3; }
    fi
    mv "$out.tmp" "$out"
    echo "kernel-caches.tgz: $(stat -c %s "$out") bytes, $(tar -tzf "$out" | grep -c '^tilelang/.*/kernels/[^/]*/$' || true) TileLang kernels," \
      "$(tar -tzf "$out" | grep -c '^triton/[^/]*/$' || true) Triton kernels" ;;
  restore)
    file=${2-}
    [ -f "$file" ] || { echo "kernels.sh restore: FILE must be an archive of 'kernels.sh pack', got '$file'" >&2; exit 2; }
    stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
    tar -C "$stage" -xzf "$file"
    mkdir -p "$tilelang" "$triton"
    [ -d "$stage/tilelang" ] && cp -a "$stage/tilelang/." "$tilelang/"
    [ -d "$stage/triton" ] && cp -a "$stage/triton/." "$triton/"
    echo "kernels restored from $file into $tilelang and $triton" ;;
  *) echo "kernels.sh: first argument must be 'pack' or 'restore', got '${1-}'" >&2; exit 2 ;;
esac
