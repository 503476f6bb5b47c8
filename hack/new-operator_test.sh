#!/usr/bin/env bash
# Proves `make new-operator` is complete (docs/operators.md, "Adding an
# operator"): in a copy of this repository (its tracked and untracked files),
# it generates NAME=demo, runs `make generate manifests` for it, then builds
# the operator in the workspace and with GOWORK=off, vets it, checks gofmt and
# a tidy go.mod, builds its deploy base, and runs its integration test
# against the real control plane (CAIRN_CONTROLPLANE_DIR). The Go build and
# module caches are the caller's (shared), so it costs little more than the
# demo operator's own compile and test. `make test-new-operator`; part of
# `make test`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
name=${NEW_OPERATOR_NAME:-demo}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-new-operator.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
step() { printf '\nnew-operator_test: %s (%ds)\n' "$*" "$SECONDS"; }

step "copying the repository to $tmp"
(cd "$root" && git ls-files -z --cached --others --exclude-standard -- . ':!:bin' |
  tar --null --ignore-failed-read -T - -cf -) 2>/dev/null | tar -xf - -C "$tmp"
# bin/: the control plane and the code generators, linked file by file (never
# written through: the copy's hack/tools/go.mod is made older than them, so
# make does not rebuild controller-gen).
mkdir -p "$tmp/bin/tools"
for f in "$root"/bin/controlplane-*; do ln -s "$(readlink -f "$f")" "$tmp/bin/$(basename "$f")"; done
for f in "$root"/bin/tools/*; do ln -s "$(readlink -f "$f")" "$tmp/bin/tools/$(basename "$f")"; done
touch -d '2000-01-01' "$tmp/hack/tools/go.mod"
cd "$tmp"

step "make new-operator NAME=$name"
make --no-print-directory new-operator NAME="$name"
step "make generate manifests (BASES=$name: the other bases are not touched)"
make --no-print-directory generate manifests BASES="$name"
for f in "apis/$name/v1/zz_generated.deepcopy.go" "deploy/$name/rbac/generated/role.yaml" "deploy/$name/webhook/generated/manifests.yaml"; do
  test -s "$f" || { echo "new-operator_test: $f was not generated" >&2; exit 1; }
done
ls "deploy/$name/crd/bases/"*.yaml >/dev/null

cd "operators/$name"
step "gofmt, go vet, build (go.work and GOWORK=off), go.mod tidy"
unformatted=$(gofmt -l . "../../apis/$name")
test -z "$unformatted" || { echo "new-operator_test: not gofmt'ed: $unformatted" >&2; exit 1; }
go vet ./... "cairn.dev/apis/$name/..."
CGO_ENABLED=0 go build -trimpath -o /dev/null .
GOWORK=off CGO_ENABLED=0 go build -trimpath -o /dev/null .
GOWORK=off GOPROXY=off go mod tidy -diff
cd "$tmp"
if [[ -x bin/tools/kustomize ]] || command -v kustomize >/dev/null; then
  step "kustomize build deploy/$name"
  "$(command -v kustomize || echo bin/tools/kustomize)" build "deploy/$name" >/dev/null
fi

step "its integration test"
go test -count=1 -timeout 10m "./operators/$name/..."
step "passed"
