package testenv

import (
	"path/filepath"
	"testing"

	"cairn.dev/libs/manager"
)

// ForOperator is what an operator's integration tests (and its bench)
// install: the CRDs of the deploy bases (the operator's own when none is
// given), the generated webhooks of the first, and the operator's scheme
// (client-go's and its API groups).
func ForOperator(op manager.Operator, bases ...string) (Options, error) {
	if len(bases) == 0 {
		bases = []string{op.Name}
	}
	root, err := RepoRoot()
	if err != nil {
		return Options{}, err
	}
	scheme, err := op.Scheme()
	if err != nil {
		return Options{}, err
	}
	o := Options{Scheme: scheme, WebhookManifestDirs: []string{filepath.Join(root, "deploy", bases[0], "webhook", "generated")}}
	for _, b := range bases {
		o.CRDDirectoryPaths = append(o.CRDDirectoryPaths, filepath.Join(root, "deploy", b, "crd", "bases"))
	}
	return o, nil
}

// OperatorMain is the TestMain body of an operator's integration tests:
// Main with ForOperator(op, bases...).
func OperatorMain(m *testing.M, op manager.Operator, env **Env, bases ...string) {
	opts, err := ForOperator(op, bases...)
	if err != nil {
		MainFunc(m, func() (func(), error) { return nil, err })
		return
	}
	Main(m, opts, env)
}
