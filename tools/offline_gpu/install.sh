#!/usr/bin/env bash
# On the GPU machine, from the checkout: install a payload made by pack.sh.
#   install.sh site DIR    fla/TileLang + wheels into /tmp/site, an earlier machine's compiled kernels when
#                          data/gpu_memo/kernel-caches.tgz is committed (kernels.sh), then a detached kernel warm-up
#                          (warm.py, pid in /tmp/warm.pid) of the head shapes in $WARM_SHAPES (default all; a
#                          SmolLM2 layout share needs 9x64 only), checked before anything is installed
#   install.sh assets DIR  weight/tokenizer packages into /tmp/site, the prepared cache into /tmp/hlcache
#   install.sh records FILE  an earlier machine's records.tgz (collect.sh; python -m hybridlib.carry) into
#                          /tmp/hlcache: its students' run records and scores, SoftCKA and first-FA measurements
#                          and memoized experiments are not run again, if this tree's library code is the same
set -euo pipefail
what=$1; dir=$2
case $what in
  site)
    python3 tools/offline_gpu/warm.py --check ${WARM_SHAPES:-}
    mkdir -p /tmp/site /tmp/offline-wheels
    tar -C /tmp/site -xJf "$dir/site.tar.xz" && tar -C /tmp/offline-wheels -xf "$dir/wheels.tar"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      /tmp/offline-wheels/*.whl 2>&1 | grep -v "Target directory" || true
    source tools/offline_gpu/env.sh
    [ -f data/gpu_memo/kernel-caches.tgz ] && bash tools/offline_gpu/kernels.sh restore data/gpu_memo/kernel-caches.tgz
    setsid nohup python3 tools/offline_gpu/warm.py ${WARM_SHAPES:-} > /tmp/warm.log 2>&1 < /dev/null & echo $! > /tmp/warm.pid
    python3 -c "import transformers, datasets, fla; print('installed', transformers.__version__, fla.__version__)"
    python3 -c "import papermill" 2>/dev/null || echo "install.sh: papermill missing: benchmarks run, chapters do not" ;;
  assets)
    mkdir -p /tmp/hlcache && tar -C /tmp/site -xf "$dir/pkgs.tar" && tar -C /tmp/hlcache -xJf "$dir/cache.tar.xz" ;;
  records)
    source tools/offline_gpu/env.sh && python3 -m hybridlib.carry unpack "$dir" ;;
  *) echo "install.sh: first argument must be 'site', 'assets' or 'records', got '$what'" >&2; exit 2 ;;
esac
