#!/usr/bin/env bash
# Runs commands at the same time, each line of their output prefixed with its
# name, and fails when any of them fails, saying which (all are waited for).
# `make demo` and CI use it to download and install (apt, debootstrap: mostly
# waiting on the network and the disk) while the control plane compiles (CPU).
#
# Usage: hack/parallel.sh NAME 'COMMAND' [NAME 'COMMAND']...
set -uo pipefail
[ $# -ge 2 ] && [ $(($# % 2)) -eq 0 ] || { echo "usage: $0 NAME 'COMMAND' [NAME 'COMMAND']..." >&2; exit 2; }

names=() pids=()
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
start=$SECONDS
while [ $# -gt 0 ]; do
  name=$1 cmd=$2; shift 2
  names+=("$name")
  # sed -u: every line as it comes; pipefail: the command's status, not sed's.
  ( set -o pipefail; bash -c "$cmd" 2>&1 | sed -u "s/^/[$name] /" ) &
  pids+=($!)
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; rc=$?
  if [ $rc -eq 0 ]; then
    printf '[%s] done (%d s since the start)\n' "${names[$i]}" $((SECONDS - start))
  else
    failed+=("${names[$i]}")
    printf '[%s] FAILED (exit status %d): its lines above, prefixed [%s], say why\n' "${names[$i]}" $rc "${names[$i]}" >&2
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "parallel: failed: ${failed[*]}" >&2; exit 1; }
