#!/usr/bin/env bash
# Pairs of places between two different operators that share six or more
# lines (issue 24's figure): `hack/crossdup.sh` non-test, `hack/crossdup.sh all` with tests.
# Reads with the `duplicates` tool of the development machine.
#
# Go import blocks are not counted. The tool says it passes import lines
# over, and it does for one-line imports (`import "x"`), but it does not
# know Go's grouped form (`import ( ... )`): each `"path"` or `alias "path"`
# line inside one counted as code. Two files of the same kind (two
# controller tests) import much the same packages in the same gofmt order,
# so most of the pairs it reported (at 74cc2af: 40 of the 43 with tests,
# all 3 non-test ones) were runs of two import blocks, sometimes with the
# two or three lines after them (`func TestX(t *testing.T) {`,
# `g := NewWithT(t)`, `ctx := ...`). A Go file's imports cannot be shared
# with another package's file, so that is not duplication one could remove.
# The script therefore reads a copy of the files the tool would read (those
# git tracks below operators/ and the untracked ones it does not ignore),
# each Go import block replaced by as many blank lines (so line numbers stay
# those of the real files), and counts as before. CROSSDUP_IMPORTS=1 counts
# the old way, import blocks included (for comparing with issue 24's
# earlier figures). See docs/operators.md, "Measures".
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-nontest}
tree=operators
if [ "${CROSSDUP_IMPORTS:-}" != 1 ]; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  git -C operators ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "operators/$f" ] || [ -L "operators/$f" ] || continue # deleted in the working tree
    mkdir -p "$tree/$(dirname "$f")"
    if [[ $f == *.go && ! -L "operators/$f" ]]; then
      # `import (` to its `)`, both included, become blank lines.
      awk '/^import \($/ { inblock = 1 } inblock { if ($0 ~ /^\)$/) inblock = 0; print ""; next } { print }' \
        "operators/$f" >"$tree/$f"
    else
      cp -P "operators/$f" "$tree/$f"
    fi
  done
fi
duplicates --repo "$tree" --most 200 --seconds 300 | awk -v mode="$mode" '
/^D[0-9]+ / {
  a=$2; b=$4
  split(a, pa, "/"); split(b, pb, "/")
  if (pa[1] == pb[1]) next
  if (mode != "all" && (a ~ /_test\.go/ || b ~ /_test\.go/)) next
  n++; print
}
/^(incomplete|left out):/ || / more pairs\)$/ { print > "/dev/stderr" }
END { printf "cross-operator pairs (%s): %d\n", mode, n }'
