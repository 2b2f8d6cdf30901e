#!/usr/bin/env bash
# Usage: freeze.sh [REV] : write the tree of commit REV (default HEAD) to .gpu/frozen/tree-<commit>.tar.gz (~4 MB),
# for `queue.sh --tree`. A campaign resumed on a later machine from an earlier one's records (install.sh records) reuses
# its finished experiments only under the same library code; running the frozen tree keeps that code while the
# checkout moves on.
set -euo pipefail
commit=$(git rev-parse --verify "${1:-HEAD}^{commit}")
mkdir -p .gpu/frozen
git archive --format=tar.gz -o ".gpu/frozen/tree-$commit.tar.gz" "$commit"
ls -la ".gpu/frozen/tree-$commit.tar.gz"
