#!/usr/bin/env bash
# Builds the control-plane binaries that the tests run, from Go modules, into
# the folder given as $1 (versioned by the Makefile). A binary that is already
# there is not rebuilt. Everything is built into a temporary folder next to
# $1 and renamed into place, so an interrupted build never leaves a
# half-written binary that looks done.
#
# Three builds run at once, each in its own module graph: kube-apiserver,
# kube-controller-manager and kube-scheduler in one `go build` (this module:
# one action graph, so a link overlaps the other binaries' compiles), etcd
# (./etcd: etcd's version comes from go.etcd.io/etcd/api/v3, which is v3.7.0
# in Kubernetes' graph) and kwok + kwokctl (their own module: kwok v0.7.0
# imports packages that Kubernetes 1.37's libraries no longer have). Their
# module downloads and links fill the cores while another one compiles.
#
# The binaries are built as before (-trimpath, -s -w, Go's default cgo
# setting, hack/controlplane's own module graph). A variant that builds with
# the operators' configuration (CGO_ENABLED=0, no -trimpath, the workspace's
# dependency versions) so the operators' first build reuses client-go & co
# from the build cache was tried in session 7 and not taken yet: it moves 62
# of Kubernetes' dependencies to newer versions and was not tested end to end
# (docs/e2e.md, "Measured").
set -euo pipefail

out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

K8S_VERSION=v1.37.2
KWOK_VERSION=v0.7.0
export GOWORK=off GOFLAGS=-mod=mod
# GOGC is left at Go's default: GOGC=400 was measured (docs/e2e.md, session
# 7) at no gain beyond the noise for the compiler or the linker.

vpkg=k8s.io/component-base/version
cvpkg=k8s.io/client-go/pkg/version
ldflags="-s -w"
for p in $vpkg $cvpkg; do
  ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

k8s=() kwok=() etcd=()
for c in kube-apiserver kube-controller-manager kube-scheduler; do [ -x "$out/$c" ] || k8s+=("$c"); done
for c in kwok kwokctl; do [ -x "$out/$c" ] || kwok+=("$c"); done
[ -x "$out/etcd" ] || etcd=(etcd)
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl; do
  [ -x "$out/$c" ] && echo "controlplane: $c present"
done
if [ $((${#k8s[@]} + ${#kwok[@]} + ${#etcd[@]})) -eq 0 ]; then
  echo "controlplane: ready in $out"; exit 0
fi

tmp=$(mktemp -d "$out/.build.XXXXXX")
mkdir -p "$tmp/bin"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# job NAME BINARIES... -- COMMAND...: runs COMMAND in the background (output in
# $tmp/NAME.log), then records its wall time and CPU seconds in $tmp/NAME.done.
job() {
  local name=$1; shift
  local bins=()
  while [ "$1" != -- ]; do bins+=("$1"); shift; done; shift
  echo "controlplane: building ${bins[*]} ..."
  (
    t0=$SECONDS
    "$@" >"$tmp/$name.log" 2>&1
    # `times`' second line: user and system CPU of this job's processes.
    times >"$tmp/$name.times"
    echo "$((SECONDS - t0)) $(tail -1 "$tmp/$name.times")" >"$tmp/$name.done"
  ) &
  pids+=($!)
  names+=("$name")
}
names=()

if [ ${#etcd[@]} -gt 0 ]; then
  job etcd etcd -- bash -c 'cd "$1/etcd" && go build -trimpath -ldflags "-s -w" -o "$2/bin/etcd" .' _ "$here" "$tmp"
fi
if [ ${#kwok[@]} -gt 0 ]; then
  pkgs=(); for c in "${kwok[@]}"; do pkgs+=("sigs.k8s.io/kwok/cmd/$c@$KWOK_VERSION"); done
  job kwok "${kwok[@]}" -- env GOBIN="$tmp/bin" go install -trimpath -ldflags "-s -w" "${pkgs[@]}"
fi
if [ ${#k8s[@]} -gt 0 ]; then
  pkgs=(); for c in "${k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  job k8s "${k8s[@]}" -- bash -c 'cd "$1" && shift && go build "$@"' _ "$here" -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}"
fi

failed=()
for i in "${!pids[@]}"; do
  name=${names[$i]}
  if wait "${pids[$i]}" && [ -f "$tmp/$name.done" ]; then
    read -r secs u s <"$tmp/$name.done"
    echo "controlplane: built $name in $secs s (CPU: user $u, system $s)"
  else
    failed+=("$name")
    echo "controlplane: building $name FAILED; its output:" >&2
    sed "s/^/controlplane[$name]: /" "$tmp/$name.log" >&2
  fi
done
pids=()
if [ ${#failed[@]} -gt 0 ]; then
  echo "controlplane: failed: ${failed[*]} (what was built is kept; run again to build the rest)" >&2
fi
for c in "${etcd[@]}" "${k8s[@]}" "${kwok[@]}"; do
  if [ -x "$tmp/bin/$c" ]; then mv "$tmp/bin/$c" "$out/$c"
  elif [ ${#failed[@]} -eq 0 ]; then echo "controlplane: $c: its build succeeded but wrote no binary" >&2; failed+=("$c"); fi
done
[ ${#failed[@]} -eq 0 ] || exit 1
echo "controlplane: ready in $out"
