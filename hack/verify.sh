#!/usr/bin/env bash
# Fails when the tree is not as `make fmt tidy generate manifests` would leave
# it: unformatted Go, go vet findings, untidy go.mod/go.sum, stale generated
# code or manifests. Changes nothing it does not put back.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
say() { printf 'verify: %s\n' "$*"; }

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  say "gofmt needed (run make fmt):"; printf '  %s\n' $unformatted; fail=1
fi

# No large file may be committed (built binaries, generated data): a
# submission has a size limit, and such files belong in bin/ or a temp folder.
big=$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$1 > 1048576 {print}')
if [ -n "$big" ]; then
  say "tracked files over 1 MiB (build output? keep it out of git):"; echo "$big"; fail=1
fi

# No hand-written Go file over 500 lines (issue 24: a file that size does
# more than one thing; split it by what its parts do). Tests, generated code
# and the upstream code under hack/controlplane are left out.
long=$(git ls-files '*.go' | grep -v -e '_test\.go$' -e 'zz_generated' -e '^hack/controlplane/' |
  xargs -r wc -l | awk '$2 != "total" && $1 > 500 {print}')
if [ -n "$long" ]; then
  say "non-test Go files over 500 lines (split them):"; echo "$long"; fail=1
fi

# Every module: go vet (in the workspace) and go mod tidy (on its own, as a
# release builds it with GOWORK=off).
modules=$(make -s --no-print-directory print-modules)
for m in $modules; do
  case "$m" in
    hack/controlplane|hack/controlplane/etcd|hack/tools) ;; # upstream code only
    hack/release) (cd "$m" && GOWORK=off go vet ./...) || { say "go vet failed in $m"; fail=1; } ;;
    hack/*) (cd "$m" && GOWORK=off go vet ./...) || { say "go vet failed in $m"; fail=1; } ;;
    *) if [ -n "$(cd "$m" && go list ./... 2>/dev/null)" ]; then
         (cd "$m" && go vet ./...) || { say "go vet failed in $m"; fail=1; }
       fi ;;
  esac
  cp "$m/go.mod" /tmp/verify.go.mod; [ -f "$m/go.sum" ] && cp "$m/go.sum" /tmp/verify.go.sum || : > /tmp/verify.go.sum
  (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1) || { say "go mod tidy failed in $m"; fail=1; }
  if ! git diff --quiet -- "$m/go.mod" "$m/go.sum"; then
    say "$m: go.mod/go.sum not tidy (run make tidy)"; git --no-pager diff --stat -- "$m/go.mod" "$m/go.sum"; fail=1
  fi
done

# Generated code and manifests.
make -s --no-print-directory generate manifests >/dev/null
stale=$(git status --porcelain -- apis libs deploy | grep -E 'zz_generated|crd/bases|rbac/generated|webhook/generated|testdata/crds' || true)
if [ -n "$stale" ]; then
  say "generated files are stale (run make generate manifests):"; echo "$stale"; fail=1
fi

[ "$fail" -eq 0 ] && say "ok" || { say "FAILED"; exit 1; }
