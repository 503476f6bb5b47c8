#!/usr/bin/env bash
# make e2e: the end-to-end packages in two lanes side by side.
#
# Each package starts its own control plane, operators, data servers and
# pod-runner node (cairn-pods-<package>), so two can run at once. One lane
# runs E2E_BESIDE (tests/data: ~23 min, most of it waiting on the clock —
# cron minutes, WAL segment ages, RPO windows — at a load average of
# 0.2-1.5 on 2 cores); the other runs every other package one after
# another (-p 1, ~21 min). Measured one after another: 45 min. The shared
# packages are compiled once first, so the lanes do not compile the same
# packages twice at once. Lane output is prefixed with its name; the run
# fails if either lane fails.
set -euo pipefail
cd "$(dirname "$0")/.."

flags=${E2E_FLAGS:--count=1 -timeout 45m -v}
beside=${E2E_BESIDE:-./e2e/tests/data/}

# $flags and $beside are lists of words: unquoted on purpose below.
mapfile -t all < <(go list ./e2e/...)
mapfile -t first < <(go list $beside)
mapfile -t rest < <(printf '%s\n' "${all[@]}" | grep -vxF -f <(printf '%s\n' "${first[@]}"))

# Compile what the packages share once (the env's GOFLAGS and CGO_ENABLED
# are the lanes'); each lane then compiles only its test files and links.
echo "e2e: compiling the packages the lanes share"
go build ./e2e/...

lane() {
  local name=$1; shift
  go test $flags -p 1 "$@" 2>&1 | sed -u "s/^/[$name] /"
}

echo "e2e: lane 'beside' runs ${first[*]}; lane 'rest' runs the other ${#rest[@]} packages"
lane beside "${first[@]}" &
pid=$!
rc=0
lane rest "${rest[@]}" || rc=$?
wait "$pid" || rc=$?
[ "$rc" = 0 ] && echo "e2e: both lanes passed" || echo "e2e: FAILED (see the lanes' FAIL lines above)"
exit "$rc"
