package testtype

import (
	"path/filepath"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// CRDDir is the folder with Widget's generated CRD.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "crds")
}

// RBACDir is the folder with the Widget operator's RBAC (hand-written, as
// an operator's generated role.yaml and leader_election_role.yaml).
func RBACDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "rbac", "widget")
}

// WebhookDir is the folder with a validating webhook configuration for
// Widgets (failure policy Ignore): a Widget operator that serves
// /validate-test-cairn-dev-v1-widget refuses what it likes.
func WebhookDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "webhook")
}

// Scheme has client-go's kinds and Widget.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(AddToScheme(s))
	return s
}
