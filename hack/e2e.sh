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
# packages twice at once. Lane output is prefixed with its name and kept in
# $E2E_LOGDIR (default: a new directory under /tmp); the run fails if either
# lane fails, and then ends with a short summary of each failed test (its
# own output, not the operators' logs) — CI keeps only the end of the
# output, which a failed package fills with operator logs.
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

logdir=${E2E_LOGDIR:-$(mktemp -d /tmp/cairn-e2e.XXXXXX)}
mkdir -p "$logdir"

lane() {
  local name=$1; shift
  go test $flags -p 1 "$@" 2>&1 | tee "$logdir/$name.log" | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}

# summary prints, for each failed test of a lane's log, the last lines of
# that test's own output (operator logs, JSON lines, left out), and the
# lane's package results; a package that panicked (a timeout) gets its
# last lines instead.
summary() {
  awk -v lane="$1" '
    function out(s) { print "[" lane "] " substr(s, 1, 400) }
    /^[{]"level"/ || /^---? .* operator log/ { next }
    /^=== (RUN|CONT|NAME) / { cur = $3; next }
    /^ *--- FAIL: / {
      name = $3
      n = cnt[name]; from = n > 25 ? n - 25 : 0
      out("--- " name ": the last " (n - from) " lines of its output:")
      for (i = from; i < n; i++) out("    " buf[name, i % 25])
      out($0); next
    }
    /^(FAIL|ok) *\t/ || /^panic: / { out($0); if ($0 ~ /^panic: /) panicked = 1; next }
    { if (cur != "") { buf[cur, cnt[cur] % 25] = $0; cnt[cur]++ } ; tail[nt++ % 30] = $0 }
    END { if (panicked) { out("the last lines before the panic:"); for (i = (nt > 30 ? nt - 30 : 0); i < nt; i++) out(tail[i % 30]) } }
  ' "$logdir/$1.log"
}

echo "e2e: lane 'beside' runs ${first[*]}; lane 'rest' runs the other ${#rest[@]} packages"
lane beside "${first[@]}" &
pid=$!
rc=0
lane rest "${rest[@]}" || rc=$?
wait "$pid" || rc=$?
if [ "$rc" = 0 ]; then
  echo "e2e: both lanes passed (logs: $logdir)"
else
  echo "e2e: FAILED — summary of the failed tests (whole logs: $logdir):"
  summary beside
  summary rest
fi
exit "$rc"
