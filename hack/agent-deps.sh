#!/usr/bin/env bash
# Installs what the agent's data-path tests and benchmark need on a fresh
# Debian machine, skipping whatever is already present (idempotent):
#   - PostgreSQL 15 server + client (/usr/lib/postgresql/15/bin, pg_dump, pg_restore)
#   - MariaDB server + client (mariadbd, mariadb-install-db, mysqldump, mysql)
#   - zstd (the benchmark's `pg_dump -Fc | zstd` baseline)
#   - restic (the benchmark's peer: K8up's `pg_dump | restic backup --stdin`)
#   - age (the encryption test decrypts an agent's artifact by hand with it)
#   - pgcopydb (the migration benchmark's peer: `pgcopydb clone`)
#   - mydumper/myloader (the parallel benchmark's MySQL peers, Debian's mydumper)
#   - versitygw v1.8.0 (real S3 server) into <repo>/bin/tools
# Usage: hack/agent-deps.sh   (as root; run from anywhere)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$ROOT/bin/tools}"
VERSITYGW_VERSION="v1.8.0"

log() { printf 'agent-deps: %s\n' "$*"; }

need_apt=()
[ -x /usr/lib/postgresql/15/bin/initdb ] && [ -x /usr/lib/postgresql/15/bin/pg_ctl ] || need_apt+=(postgresql-15)
command -v pg_dump >/dev/null 2>&1 && command -v pg_restore >/dev/null 2>&1 && command -v psql >/dev/null 2>&1 || need_apt+=(postgresql-client-15)
{ command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } && command -v mariadb-install-db >/dev/null 2>&1 || need_apt+=(mariadb-server)
command -v mysqldump >/dev/null 2>&1 && command -v mysql >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v zstd >/dev/null 2>&1 || need_apt+=(zstd)
command -v restic >/dev/null 2>&1 || need_apt+=(restic)
command -v age >/dev/null 2>&1 || need_apt+=(age)
command -v pgcopydb >/dev/null 2>&1 || need_apt+=(pgcopydb)
command -v mydumper >/dev/null 2>&1 && command -v myloader >/dev/null 2>&1 || need_apt+=(mydumper)
command -v runuser >/dev/null 2>&1 || need_apt+=(util-linux)

if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "need root to install: ${need_apt[*]}" >&2
    exit 1
  fi
  log "installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  # The Debian packages start a system-wide server through the init system
  # when one runs; the tests never use it (they start private instances on
  # free loopback ports), so a failure to start it is harmless.
  apt-get install -y --no-install-recommends "${need_apt[@]}"
else
  log "PostgreSQL 15, MariaDB, zstd, restic, age, pgcopydb, mydumper: present"
fi

if [ -x "$TOOLS_DIR/versitygw" ]; then
  log "versitygw: present in $TOOLS_DIR"
else
  log "installing versitygw $VERSITYGW_VERSION into $TOOLS_DIR (takes a few minutes)"
  GO=go
  if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else
      log "go not found (PATH or /usr/local/go/bin): needed to build versitygw" >&2; exit 1
    fi
  fi
  mkdir -p "$TOOLS_DIR"
  GOBIN="$TOOLS_DIR" GOWORK=off "$GO" install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
log "done"
