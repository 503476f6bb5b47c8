package testtype

import (
	"os"
	"path/filepath"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// libsDir is the libs module's folder: the nearest go.mod above the
// working directory (a test's is its package's folder). Not the source
// file's path: the tests are built with -trimpath (Makefile), which makes
// that path a module path.
func libsDir() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			panic("testtype: no go.mod above the working directory: run the tests from the libs module")
		}
		dir = up
	}
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
