package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/kustomize/api/types"

	"cairn.dev/hack/release"
)

// TestEveryBaseIsInstalled: adding an operator is one list, the platform's
// resources (and its image pin next to them). Every base under deploy/ is
// installed by the platform and pinned there, belongs to an operator module
// (operators/<name>, which the Makefile builds and tests), and is what the
// release tool releases.
func TestEveryBaseIsInstalled(t *testing.T) {
	r := root(t)
	bases, err := release.Operators(r)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(slices.Sorted(slices.Values(operators)), bases) {
		t.Errorf("the platform installs %v; deploy/ has the bases %v: add each base to platform/kustomization.yaml", operators, bases)
	}
	pins, err := release.PlatformImages(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range bases {
		if !slices.ContainsFunc(pins, func(i types.Image) bool { return i.Name == release.OperatorImage(op) }) {
			t.Errorf("platform/kustomization.yaml pins no image %s", release.OperatorImage(op))
		}
		if _, err := os.Stat(filepath.Join(r, "operators", op, "go.mod")); err != nil {
			t.Errorf("base deploy/%s has no operator module: %v", op, err)
		}
	}
}
