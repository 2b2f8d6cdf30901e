#!/usr/bin/env bash
# Usage: light.sh on [ARCHIVE...] [--runs ARCHIVE...] | off : every `run` call uploads the tracked tree, and the
# committed records (data/gpu_memo/<commit>/: float64 measurements that do not compress) are most of it.
#   on   takes the record folders out of the index for the GPU calls (the files stay, ignored through
#        .git/info/exclude) and copies the archives a machine installs (ARCHIVE..., paths under data/gpu_memo/) to
#        .gpu/records/: parts.sh then prints the first call carrying them and the last installing each; the
#        archives after --runs go as their students' run records only, together in .gpu/records/runs.tgz (~6 KB a
#        student): enough for campaign.sh --lr-check / --other-teachers to pick the best FA-first layout, not for a
#        share that scores or measures those students
#   off  puts the folders back in the index and drops the exclude line: `git status` as before `on`
# Run parts.sh after `on` (the parts grow into the room the records leave). Commit nothing while on: the records
# would leave the branch; `on` refuses a checkout with staged changes, `off` one that still has them.
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
line='/data/gpu_memo/*/'
exclude=$(git rev-parse --git-path info/exclude)
case ${1-} in
  on)
    shift
    git diff --cached --quiet || { echo "light.sh: the index holds staged changes (or 'on' ran already: 'off' first)" >&2
      exit 2; }
    whole=() runs=() into=whole
    for a in "$@"; do
      if [ "$a" = --runs ]; then into=runs; continue; fi
      [[ $a == data/gpu_memo/*/*.tgz && -f $a ]] || { echo "light.sh: ARCHIVE must be a records archive under" \
        "data/gpu_memo/<commit>/, got '$a'" >&2; exit 2; }
      if [ $into = runs ]; then runs+=("$a"); else whole+=("$a"); fi
    done
    dup=$(for a in "${whole[@]}" ${runs[@]:+runs.tgz}; do basename "$a"; done | sort | uniq -d)
    [ -z "$dup" ] || { echo "light.sh: two ARCHIVEs share the name $dup (.gpu/records/ holds one of each name)" >&2
      exit 2; }
    slim=$(mktemp -d); trap 'rm -rf "$slim"' EXIT  # each --runs archive's students/<key>/run.json, one tree
    for a in "${runs[@]}"; do
      tar -C "$slim" -xzf "$a" --wildcards 'students/*/run.json' 2>/dev/null || { echo "light.sh: --runs: '$a'" \
        "holds no student's run record (students/<key>/run.json)" >&2; exit 2; }
    done
    mkdir -p "$(dirname "$exclude")" .gpu/records
    grep -qxF "$line" "$exclude" 2>/dev/null || echo "$line" >> "$exclude"
    dirs=$(git ls-files -- 'data/gpu_memo/*/*' | xargs -r -n1 dirname | sort -u)
    [ -z "$dirs" ] || git rm -r -q --cached -- $dirs
    rm -f .gpu/records/*.tgz
    [ ${#whole[@]} -eq 0 ] || cp "${whole[@]}" .gpu/records/
    [ ${#runs[@]} -eq 0 ] || tar -C "$slim" -czf .gpu/records/runs.tgz students
    echo "light.sh: records out of the upload (parts.sh next); .gpu/records: $(ls .gpu/records | tr '\n' ' ')" ;;
  off)
    git reset -q -- data/gpu_memo
    [ ! -f "$exclude" ] || { grep -vxF "$line" "$exclude" > "$exclude.new" || true; mv "$exclude.new" "$exclude"; }
    git diff --cached --quiet || { echo "light.sh: the index still holds staged changes besides the records" >&2
      exit 2; }
    echo "light.sh: records back in the index" ;;
  *) echo "usage: light.sh on [ARCHIVE...] [--runs ARCHIVE...] | off (got '${1-}')" >&2; exit 2 ;;
esac
