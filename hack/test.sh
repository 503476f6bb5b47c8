#!/usr/bin/env bash
# make test: runs each step given as an argument (a shell command line) to
# its end, even after an earlier step failed, with its output shown as it
# comes and kept in $TEST_LOGDIR (default: a new folder under /tmp); exits
# non-zero if any step failed, and then ends with a summary of each failed
# test — its name and first error lines — and each failed package, as
# `make e2e` does (hack/e2e.sh): CI keeps only the end of the output.
#
# Usage: hack/test.sh 'go test ./a/...' 'make test-agent' ...
set -uo pipefail
cd "$(dirname "$0")/.."

logdir=${TEST_LOGDIR:-$(mktemp -d /tmp/cairn-test.XXXXXX)}
mkdir -p "$logdir"
failed=()
i=0
start=$SECONDS
for step in "$@"; do
  i=$((i + 1))
  log="$logdir/step$i.log"
  printf 'test: step %d/%d: %s\n' "$i" "$#" "$step"
  t0=$SECONDS
  bash -o pipefail -c "$step" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  printf 'test: step %d/%d exited %d after %ds\n' "$i" "$#" "$rc" "$((SECONDS - t0))"
  [ "$rc" = 0 ] || failed+=("$i")
done

if [ "${#failed[@]}" = 0 ]; then
  printf 'test: all %d steps passed in %ds (logs: %s)\n' "$#" "$((SECONDS - start))" "$logdir"
  exit 0
fi

# summary prints, for a step's log, each failed test with the first lines of
# its output (go test prints them indented under "--- FAIL:"), each failed
# package, and a panic's first lines.
summary() {
  awk '
    function out(s) { print "    " substr(s, 1, 300) }
    /^ *--- FAIL: / { out($0); infail = 1; n = 0; next }
    infail && /^ +/ { if (n < 12) out($0); n++; next }
    { infail = 0 }
    /^panic: / { inpanic = 1; np = 0 }
    inpanic { if (np < 15) out($0); else inpanic = 0; np++; next }
    /^FAIL\t/ || /^make(\[[0-9]+\])?: \*\*\*/ { out($0) }
' "$1"
}

echo
printf 'test: FAILED — %d of %d steps (whole logs: %s):\n' "${#failed[@]}" "$#" "$logdir"
for n in "${failed[@]}"; do
  printf 'test: step %d: %s\n' "$n" "${!n}"
  summary "$logdir/step$n.log"
done
exit 1
