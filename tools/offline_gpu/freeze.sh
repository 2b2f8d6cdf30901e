#!/usr/bin/env bash
# Usage: freeze.sh [REV] : write the tree of commit REV (default HEAD) to .gpu/frozen/tree-<commit>.tar.gz (~4 MB),
# for `queue.sh --tree`, and the digests of the sources that key its records (`hybridlib.campaign.record_codes`) to
# .gpu/frozen/codes-<commit>.json: commit that file as data/gpu_memo/<commit>/codes.json beside the campaign's records
# (tests/test_gpu_records.py then checks this checkout still finds them). A campaign resumed on a later machine from an
# earlier one's records (install.sh records) reuses its finished experiments only under the same library code; running
# the frozen tree keeps that code while the checkout moves on.
set -euo pipefail
commit=$(git rev-parse --verify "${1:-HEAD}^{commit}")
repo=$(pwd)
mkdir -p .gpu/frozen
# without data/gpu_memo: the records travel in the checkout the calls upload (install.sh records)
git archive --format=tar.gz -o ".gpu/frozen/tree-$commit.tar.gz" "$commit" -- . ":(exclude)data/gpu_memo"
ls -la ".gpu/frozen/tree-$commit.tar.gz"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
tar -xzf ".gpu/frozen/tree-$commit.tar.gz" -C "$tree"
if grep -q "^def record_codes" "$tree/hybridlib/campaign.py"; then
  (cd "$tree" && PYTHONPATH="$tree" "$repo/.venv/bin/python" -c \
    'import json; from hybridlib.campaign import record_codes; print(json.dumps(record_codes(), sort_keys=True))') \
    > ".gpu/frozen/codes-$commit.json"
  cat ".gpu/frozen/codes-$commit.json"
else
  echo "freeze.sh: $commit has no hybridlib.campaign.record_codes: no codes file" >&2
fi
