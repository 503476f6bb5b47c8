#!/usr/bin/env bash
# Builds Cairn's images on this machine's Docker engine without pulling
# anything (no registry is reachable here):
#
#   1. the base image $BASE_IMAGE: `debootstrap --variant=minbase` of the Debian
#      release the machine runs (bookworm), imported with `docker import`.
#      Skipped when the image exists (delete it to rebuild: docker rmi ...).
#   2. the agent image $AGENT_IMAGE: agent/Containerfile, target `local`, on
#      that base, around the static agent binary (built as `make build-agent`
#      does, into the build context).
#   3. one image per operator, $OPERATOR_IMAGE_REPO/<name>-operator:$OPERATOR_IMAGE_TAG
#      (cairn.local/backup-operator:dev, ...): operators/Containerfile, target
#      `local`, on the same base, around the operator's static binary.
#
# Every binary (the agent and the operators) is compiled on the host in one
# `go build` (one process, one build cache, packages shared between them
# compiled once); nothing compiles inside an image.
#
# The e2e pod runner runs $AGENT_IMAGE for every pod whose image is the
# platform's agent image (ghcr.io/cairn-dev/agent:*); the e2e and the demo
# install the platform with the operator images above (e2e/install).
#
# Usage: hack/images/build.sh   (as root or a member of the docker group)
# Env:   BASE_IMAGE, AGENT_IMAGE, OPERATOR_IMAGE_REPO, OPERATOR_IMAGE_TAG,
#        OPERATORS (default: every operators/*/go.mod), DEBIAN_SUITE,
#        DEBIAN_MIRROR, DOCKER
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_IMAGE="${BASE_IMAGE:-cairn.local/debian:bookworm}"
AGENT_IMAGE="${AGENT_IMAGE:-cairn.local/agent:dev}"
OPERATOR_IMAGE_REPO="${OPERATOR_IMAGE_REPO:-cairn.local}"
OPERATOR_IMAGE_TAG="${OPERATOR_IMAGE_TAG:-dev}"
if [ -z "${OPERATORS:-}" ]; then
  OPERATORS="$(cd "$ROOT/operators" && for m in */go.mod; do printf '%s ' "${m%/go.mod}"; done)"
fi
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DOCKER="${DOCKER:-docker}"
# The engine here is Docker 20.10 (API 1.41): newer clients negotiate down,
# but say so explicitly so a newer client never asks for more.
export DOCKER_API_VERSION="${DOCKER_API_VERSION:-1.41}"

log() { printf 'images: %s\n' "$*"; }
die() { printf 'images: %s\n' "$*" >&2; exit 1; }

command -v "$DOCKER" >/dev/null || die "$DOCKER not found: install Docker Engine (Debian: apt-get install docker.io)"
"$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine answers ($DOCKER version): start it (systemctl start docker) or set DOCKER_HOST"

start=$SECONDS

# 1. Base image (hack/images/lib.sh, shared with servers.sh and agents.sh).
# shellcheck source=lib.sh
. "$ROOT/hack/images/lib.sh"
debian_base "$BASE_IMAGE" "$DEBIAN_SUITE" "$DEBIAN_MIRROR"

# 2. The binaries, in one go build: the agent with the flags of `make
# build-agent` (its version stamped), the operators static and stripped the
# same way (version "dev", their default). -ldflags with a package pattern
# applies to that package only; the last matching one wins.
ctx="$(mktemp -d /tmp/cairn-images-ctx-XXXXXX)"
trap 'rm -rf "$ctx"' EXIT
version="${AGENT_VERSION:-$(git -C "$ROOT" describe --tags --match 'agent/v*' --always --dirty 2>/dev/null | sed 's|^agent/||' || echo dev)}"
pkgs=(./agent)
for op in $OPERATORS; do pkgs+=("./operators/$op"); done
log "go build ${pkgs[*]} (static, -trimpath -s -w)"
t0=$SECONDS
mkdir -p "$ctx/out"
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
  -ldflags "cairn.dev/agent=-s -w -X main.version=$version" -o "$ctx/out/" "${pkgs[@]}")
# One build context per image, holding only its binary.
mkdir -p "$ctx/agent-ctx"
mv "$ctx/out/agent" "$ctx/agent-ctx/agent"
for op in $OPERATORS; do mkdir -p "$ctx/$op-ctx" && mv "$ctx/out/$op" "$ctx/$op-ctx/$op-operator"; done
log "binaries built in $((SECONDS - t0))s"

# 3. Agent image, around the host-built static binary.
log "agent $AGENT_IMAGE: docker build --target local (base $BASE_IMAGE)"
t0=$SECONDS
# Host network for the build's apt-get (the default bridge may have no route
# out on a sandboxed machine); the image itself does not depend on it.
# The classic builder (no BuildKit plugin on Docker 20.10 here) prints a
# deprecation notice: its output is shown only when the build fails.
if ! out=$(DOCKER_BUILDKIT=0 "$DOCKER" build --network host -f "$ROOT/agent/Containerfile" --target local \
  --build-arg "BASE=$BASE_IMAGE" -t "$AGENT_IMAGE" "$ctx/agent-ctx" 2>&1); then
  printf '%s\n' "$out" >&2
  die "docker build of $AGENT_IMAGE failed"
fi
log "agent $AGENT_IMAGE: built in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$AGENT_IMAGE" | numfmt --to=iec)); $("$DOCKER" run --rm --read-only --user 65532:65532 "$AGENT_IMAGE" --version)"

# 4. Operator images, each around its host-built static binary.
for op in $OPERATORS; do
  image="$OPERATOR_IMAGE_REPO/$op-operator:$OPERATOR_IMAGE_TAG"
  t0=$SECONDS
  if ! out=$(DOCKER_BUILDKIT=0 "$DOCKER" build -f "$ROOT/operators/Containerfile" --target local \
    --build-arg "LOCAL_BASE=$BASE_IMAGE" --build-arg "OPERATOR=$op" -t "$image" "$ctx/$op-ctx" 2>&1); then
    printf '%s\n' "$out" >&2
    die "docker build of $image failed"
  fi
  log "$op operator $image: built in $((SECONDS - t0))s ($("$DOCKER" image inspect -f '{{.Size}}' "$image" | numfmt --to=iec), binary $(stat -c %s "$ctx/$op-ctx/$op-operator" | numfmt --to=iec)); --version: $("$DOCKER" run --rm --read-only --user 65532:65532 "$image" --version)"
done
log "done in $((SECONDS - start))s"
