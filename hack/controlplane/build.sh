#!/usr/bin/env bash
# Builds the control-plane binaries that the tests run, from Go modules, into
# the folder given as $1 (versioned by the Makefile). A binary that is already
# there is not rebuilt. Each binary is built to a temporary name and renamed, so
# an interrupted build never leaves a half-written binary that looks done.
set -euo pipefail

out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

K8S_VERSION=v1.37.2
KWOK_VERSION=v0.7.0
export GOWORK=off GOFLAGS=-mod=mod

vpkg=k8s.io/component-base/version
cvpkg=k8s.io/client-go/pkg/version
ldflags="-s -w"
for p in $vpkg $cvpkg; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

timed() { # name, command...
  local name=$1; shift
  if [ -x "$out/$name" ]; then echo "controlplane: $name present"; return; fi
  local t0=$SECONDS
  echo "controlplane: building $name ..."
  "$@"
  echo "controlplane: built $name in $((SECONDS - t0)) s"
}

build_k8s() { # cmd name
  (cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$out/.$1.tmp" "k8s.io/kubernetes/cmd/$1")
  mv "$out/.$1.tmp" "$out/$1"
}
build_etcd() {
  (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/.etcd.tmp" .)
  mv "$out/.etcd.tmp" "$out/etcd"
}
build_kwok() { # name
  local tmp; tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/$1@$KWOK_VERSION"
  mv "$tmp/$1" "$out/$1"; rmdir "$tmp"
}

timed etcd build_etcd
timed kube-apiserver build_k8s kube-apiserver
timed kube-controller-manager build_k8s kube-controller-manager
timed kube-scheduler build_k8s kube-scheduler
timed kwok build_kwok kwok
timed kwokctl build_kwok kwokctl
echo "controlplane: ready in $out"
