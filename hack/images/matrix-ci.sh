#!/usr/bin/env bash
# Builds what the default (ci) version matrix needs — the PostgreSQL 13 and
# 18, MariaDB 11.8 and MySQL 9.7 server images and the dev-pg13 and
# dev-pg18 agent images — with the builds side by side where no two make
# the same base: they are mostly apt downloads and debootstrap's unpacking,
# not CPU. One after another (servers.sh, then agents.sh) they took ~15 min
# cold on 2 busy cores; the time side by side is printed at the end (and
# recorded in docs/compatibility.md). Each image present is skipped.
#
#   1. one server per Debian suite (pg13 bullseye, mariadb11.8 trixie,
#      pg18 sid): each makes its suite's debootstrap base;
#   2. on those bases: mysql9.7 (sid), agent dev-pg13, agent dev-pg18.
#
# Usage: hack/images/matrix-ci.sh   (as root; env as servers.sh, agents.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
start=$SECONDS

# The scripts install debootstrap when it is missing; side by side their
# apt-get calls would fight for dpkg's lock, so it is installed here first.
if ! command -v debootstrap >/dev/null; then
  [ "$(id -u)" -eq 0 ] || { echo "matrix-ci: debootstrap not found and not root: apt-get install debootstrap" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends debootstrap >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends debootstrap >/dev/null; }
fi

# side NAME:COMMAND... runs the commands side by side, each line prefixed
# with its name; fails if any failed.
side() {
  local pids=() rc=0 job
  for job in "$@"; do
    (set -o pipefail; bash -c "${job#*:}" 2>&1 | sed -u "s/^/[${job%%:*}] /") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return "$rc"
}

side "pg13:hack/images/servers.sh pg13" "mariadb11.8:hack/images/servers.sh mariadb11.8" "pg18:hack/images/servers.sh pg18"
echo "matrix-ci: bases and the first servers in $((SECONDS - start))s"
side "mysql9.7:hack/images/servers.sh mysql9.7" "agent-pg13:hack/images/agents.sh pg13" "agent-pg18:hack/images/agents.sh pg18"
echo "matrix-ci: the ci matrix's images in $((SECONDS - start))s"
