package testtype

import (
	"path/filepath"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"cairn.dev/libs/testing/testenv"
)

// libsDir is the libs module's folder, found from the working directory
// (testenv.RepoRoot), not from this file's path: the tests are built with
// -trimpath (Makefile), which makes that path a module path.
func libsDir() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	return filepath.Join(root, "libs")
}

// CRDDir is the folder with Widget's generated CRD.
func CRDDir() string {
	return filepath.Join(libsDir(), "testdata", "crds")
}

// RBACDir is the folder with the Widget operator's RBAC (hand-written, as
// an operator's generated role.yaml and leader_election_role.yaml).
func RBACDir() string {
	return filepath.Join(libsDir(), "testdata", "rbac", "widget")
}

// WebhookDir is the folder with a validating webhook configuration for
// Widgets (failure policy Ignore): a Widget operator that serves
// /validate-test-cairn-dev-v1-widget refuses what it likes.
func WebhookDir() string {
	return filepath.Join(libsDir(), "testdata", "webhook")
}

// Scheme has client-go's kinds and Widget.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}
