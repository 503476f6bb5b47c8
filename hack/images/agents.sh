#!/usr/bin/env bash
# Builds the agent's per-PostgreSQL-major images (docs/compatibility.md) on
# this machine's Docker engine, from agent/Containerfile (target `local`,
# around the static agent binary built on the host) on a debootstrap base
# of the Debian release that ships that major (hack/images/lib.sh):
#
#   cairn.local/agent:dev-pg13  bullseye  PostgreSQL 13 + MariaDB 10.5 client
#   cairn.local/agent:dev-pg17  trixie    PostgreSQL 17 + MariaDB 11.8 client
#   cairn.local/agent:dev-pg18  sid       PostgreSQL 18 + Oracle MySQL 9.7 client
#
# (cairn.local/agent:dev, bookworm, PostgreSQL 15 + MariaDB 10.11, is
# `make images`' own.) A base present is reused; the image's package layer
# comes from Docker's build cache when the base and arguments did not
# change, so a rebuild after an agent change only copies the new binary.
#
# Usage: hack/images/agents.sh [pg13 pg17 pg18]   (default: all three)
# Env:   AGENT_IMAGE_REPO (cairn.local/agent), AGENT_IMAGE_TAG (dev), DOCKER
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DOCKER="${DOCKER:-docker}"
REPO="${AGENT_IMAGE_REPO:-cairn.local/agent}"
TAG="${AGENT_IMAGE_TAG:-dev}"
export DOCKER_API_VERSION="${DOCKER_API_VERSION:-1.41}"

log() { printf 'agent-images: %s\n' "$*"; }
die() { printf 'agent-images: %s\n' "$*" >&2; exit 1; }
# shellcheck source=lib.sh
. "$ROOT/hack/images/lib.sh"

# name suite PG MYSQL_CLIENT
VARIANTS=(
  "pg13|bullseye|13|mariadb-client"
  "pg17|trixie|17|mariadb-client mariadb-client-compat"
  "pg18|sid|18|mysql-client"
)
want=("$@")
[ "${#want[@]}" -gt 0 ] || want=(pg13 pg17 pg18)

total=$SECONDS
ctx="$(mktemp -d /tmp/cairn-agent-images-XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
version="${AGENT_VERSION:-$(git -C "$ROOT" describe --tags --match 'agent/v*' --always --dirty 2>/dev/null | sed 's|^agent/||' || echo dev)}"
t0=$SECONDS
(cd "$ROOT/agent" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$ctx/agent" .)
log "agent binary built in $((SECONDS - t0))s"

for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name suite pg client <<<"$v"
  [[ " ${want[*]} " == *" $name "* ]] || continue
  image="$REPO:$TAG-$name"
  debian_base "cairn.local/debian:$suite" "$suite"
  log "$image: docker build (PostgreSQL $pg, $client on cairn.local/debian:$suite)"
  t0=$SECONDS
  if ! out=$(DOCKER_BUILDKIT=0 "$DOCKER" build --network host -f "$ROOT/agent/Containerfile" --target local \
    --build-arg "BASE=cairn.local/debian:$suite" --build-arg "PG=$pg" --build-arg "MYSQL_CLIENT=$client" \
    -t "$image" "$ctx" 2>&1); then
    printf '%s\n' "$out" >&2
    die "docker build of $image failed"
  fi
  log "$image: built in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
done
log "done in $((SECONDS - total))s"
