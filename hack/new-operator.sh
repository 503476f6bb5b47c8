#!/usr/bin/env bash
# Generates a minimal, complete operator for a new kind from the template in
# hack/new-operator/template (`make new-operator NAME=<name>`): the API
# (apis/<name>/v1), the operator module (operators/<name>: main, operator
# wiring, controller with the skeleton's steps, Summarize, agentjob.Run and
# kindmetrics, webhooks with admit.Defaulter and a Validator, an integration
# test on libs/testing/testenv), the deploy base (deploy/<name>) and its go.work
# entry. docs/operators.md ("Adding an operator") says what to edit next.
#
# Usage: hack/new-operator.sh <name>       (lower case letters and digits)
#        PLATFORM=1 hack/new-operator.sh <name>   also adds the base to platform/
set -euo pipefail

name=${1:-}
if [[ ! $name =~ ^[a-z][a-z0-9]{1,19}$ ]]; then
  echo "usage: $0 <name>: 2-20 lower-case letters and digits, starting with a letter (got '${name}')" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
for d in "apis/$name" "operators/$name" "deploy/$name"; do
  if [[ -e $d ]]; then
    echo "new-operator: $d exists already" >&2
    exit 1
  fi
done
Name="$(tr '[:lower:]' '[:upper:]' <<<"${name:0:1}")${name:1}"
# The resource (plural), spelled out in the CRD's path marker.
case $name in
  *s | *x | *z | *ch | *sh) names=${name}es ;;
  *) names=${name}s ;;
esac
tmpl=hack/new-operator/template

# Every template file, with __name__ / __Name__ replaced in its path and text.
while IFS= read -r -d '' src; do
  rel=${src#"$tmpl"/}
  dst=${rel//__name__/$name}
  dst=${dst%.tmpl}
  mkdir -p "$(dirname "$dst")"
  sed -e "s/__Name__/$Name/g" -e "s/__names__/$names/g" -e "s/__name__/$name/g" "$src" >"$dst"
  echo "new-operator: wrote $dst"
done < <(find "$tmpl" -type f -name '*.tmpl' -print0 | sort -z)

# Alignment depends on the name's length.
gofmt -w "apis/$name" "operators/$name"

# The module: the restore operator's requirements (the same libraries),
# tidied to what this one imports — offline when the module cache has what
# tidy looks at (the tests of the dependencies' packages too: a `make
# verify` or any tidy of an operator fetched them), else through the module
# proxy (a fresh machine: offline, tidy fails with "module lookup disabled").
sed -e "s|^module cairn.dev/operators/restore$|module cairn.dev/operators/$name|" operators/restore/go.mod >"operators/$name/go.mod"
cp operators/restore/go.sum "operators/$name/go.sum"
(cd "operators/$name" && {
  GOWORK=off GOPROXY=off GOFLAGS=-mod=mod go mod tidy 2>/dev/null ||
    { echo "new-operator: the module cache lacks what go mod tidy reads; tidying through the module proxy"; GOWORK=off GOFLAGS=-mod=mod go mod tidy; }
})
go work use "./operators/$name"
echo "new-operator: wrote operators/$name/go.mod, go.sum; go.work uses ./operators/$name"

if [[ ${PLATFORM:-} == 1 ]]; then
  sed -i -e "s|^- ../deploy/orchestrator$|&\n- ../deploy/$name|" \
    -e "s|^- name: ghcr.io/cairn-dev/agent$|- name: ghcr.io/cairn-dev/$name-operator\n  newTag: v0.1.0\n&|" platform/kustomization.yaml
  echo "new-operator: added deploy/$name and its image pin to platform/kustomization.yaml"
fi

cat <<MSG

new-operator: $Name ($names.$name.cairn.dev/v1) generated. Next:
  make generate manifests    # deepcopy, deploy/$name/{crd/bases,rbac/generated,webhook/generated}
  go test ./operators/$name/...   # its integration test (CAIRN_CONTROLPLANE_DIR)
MSG
if [[ ${PLATFORM:-} != 1 ]]; then
  cat <<MSG
  The one list to edit: platform/kustomization.yaml — add "- ../deploy/$name" to
  resources and an images: pin "ghcr.io/cairn-dev/$name-operator" (or run with
  PLATFORM=1); the deploy tests fail until it is there.
MSG
fi
echo "  Then docs/operators.md, \"Adding an operator\": what to change in the generated code."
