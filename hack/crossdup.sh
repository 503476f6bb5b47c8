#!/usr/bin/env bash
# Pairs of places between two different operators that share six or more
# lines (issue 24's figure): `hack/crossdup.sh` non-test, `hack/crossdup.sh all` with tests.
# Reads with the `duplicates` tool of the development machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-nontest}
duplicates --repo operators --most 200 --seconds 300 | awk -v mode="$mode" '
/^D[0-9]+ / {
  a=$2; b=$4
  split(a, pa, "/"); split(b, pb, "/")
  if (pa[1] == pb[1]) next
  if (mode != "all" && (a ~ /_test\.go/ || b ~ /_test\.go/)) next
  n++; print
}
END { printf "cross-operator pairs (%s): %d\n", mode, n }'
