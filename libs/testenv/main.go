package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Main is a TestMain body: it starts the environment into *env, runs the
// package's tests, stops the environment and exits. When the environment
// cannot start (for example the binaries are missing) every test fails with
// the reason — the package never passes silently.
func Main(m *testing.M, opts Options, env **Env) {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
	}
	os.Exit(code)
}
