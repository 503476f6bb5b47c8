#!/usr/bin/env bash
# Builds the database server images the agent's version-matrix tests run
# (agent/internal/testenv/container.go), on this machine's Docker engine,
# from Debian packages only (no registry): a `debootstrap --variant=minbase`
# base per Debian suite (hack/images/lib.sh), then one image per server:
#
#   cairn.local/postgres:13    bullseye  postgresql-13
#   cairn.local/postgres:17    trixie    postgresql-17
#   cairn.local/postgres:18    sid       postgresql-18
#   cairn.local/mariadb:11.8   trixie    mariadb-server
#   cairn.local/mysql:9.7      sid       mysql-server (Oracle MySQL)
#
# PostgreSQL 15 and MariaDB 10.11 are the host's own servers
# (hack/agent-deps.sh). Every image present is skipped (docker rmi it to
# rebuild); each step's time and the image's size are printed.
# The images hold only the packages: the tests start the server with their
# own command (initdb / --initialize, a free loopback port, host network).
#
# Usage: hack/images/servers.sh [NAME...]   (as root; NAME: pg13 pg17 pg18
#        mariadb11.8 mysql9.7; default: all)
# Env:   DEBIAN_MIRROR, DOCKER, SERVER_IMAGE_REPO (cairn.local)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DOCKER="${DOCKER:-docker}"
REPO="${SERVER_IMAGE_REPO:-cairn.local}"
export DOCKER_API_VERSION="${DOCKER_API_VERSION:-1.41}"

log() { printf 'db-images: %s\n' "$*"; }
die() { printf 'db-images: %s\n' "$*" >&2; exit 1; }
# shellcheck source=lib.sh
. "$ROOT/hack/images/lib.sh"

command -v "$DOCKER" >/dev/null || die "$DOCKER not found: install Docker Engine (Debian: apt-get install docker.io)"
"$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine answers ($DOCKER version)"

# name image suite packages
SERVERS=(
  "pg13 $REPO/postgres:13 bullseye postgresql-13"
  "pg17 $REPO/postgres:17 trixie postgresql-17"
  "pg18 $REPO/postgres:18 sid postgresql-18"
  "mariadb11.8 $REPO/mariadb:11.8 trixie mariadb-server"
  "mysql9.7 $REPO/mysql:9.7 sid mysql-server"
)

# The Dockerfile of a server image. PostgreSQL without JIT (as the agent
# image, agent/Containerfile): an empty stand-in for the libllvmN the
# server package depends on, and dpkg leaves llvmjit out — saves ~130 MB of
# download and unpacking per image. No service is started at install
# (policy-rc.d), no cluster or data folder is kept.
dockerfile() {
  local base="$1" pkgs="$2"
  cat <<DOCKERFILE
FROM $base
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \\
 && mkdir -p /etc/postgresql-common/createcluster.d \\
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/cairn.conf \\
 && printf 'path-exclude /usr/lib/postgresql/*/lib/llvmjit*\npath-exclude /usr/lib/postgresql/*/lib/bitcode/*\n' > /etc/dpkg/dpkg.cfg.d/90cairn-nojit \\
 && apt-get update \\
 && llvm="\$(apt-cache depends $pkgs 2>/dev/null | sed -n 's/^ *Depends: \(libllvm[0-9]*\)\$/\1/p' | head -n1)" \\
 && if [ -n "\$llvm" ]; then mkdir -p /tmp/nollvm/DEBIAN \\
      && printf 'Package: %s\nVersion: 1:99+cairn.nojit\nArchitecture: %s\nMulti-Arch: same\nMaintainer: Cairn <cairn@localhost>\nSection: oldlibs\nPriority: optional\nDescription: empty stand-in for LLVM\n PostgreSQL JIT is left out of this image.\n' "\$llvm" "\$(dpkg --print-architecture)" > /tmp/nollvm/DEBIAN/control \\
      && dpkg-deb --build /tmp/nollvm /tmp/nollvm.deb >/dev/null && dpkg -i /tmp/nollvm.deb >/dev/null && rm -rf /tmp/nollvm /tmp/nollvm.deb; fi \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs util-linux \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log /var/lib/mysql/* \\
 && (ls -d /usr/lib/postgresql/*/bin/postgres /usr/sbin/mariadbd /usr/sbin/mysqld 2>/dev/null || true)
LABEL org.opencontainers.image.description="Cairn test database server: $pkgs on $base"
DOCKERFILE
}

want=("$@")
total=$SECONDS
for s in "${SERVERS[@]}"; do
  read -r name image suite pkgs <<<"$s"
  if [ "${#want[@]}" -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then continue; fi
  if "$DOCKER" image inspect "$image" >/dev/null 2>&1; then
    log "$name $image: present ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)), skipped"
    continue
  fi
  debian_base "$REPO/debian:$suite" "$suite"
  log "$name $image: docker build ($pkgs on $REPO/debian:$suite)"
  t0=$SECONDS
  if ! out=$(dockerfile "$REPO/debian:$suite" "$pkgs" | DOCKER_BUILDKIT=0 "$DOCKER" build --network host -t "$image" - 2>&1); then
    printf '%s\n' "$out" >&2
    die "docker build of $image failed"
  fi
  log "$name $image: built in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
done
log "done in $((SECONDS - total))s"
