package testenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Main is a TestMain body: it starts the environment into *env, runs the
// package's tests, stops the environment and exits. When the environment
// cannot start (for example the binaries are missing) every test fails with
// the reason — the package never passes silently.
func Main(m *testing.M, opts Options, env **Env) {
	MainFunc(m, func() (func(), error) {
		e, err := Start(opts)
		if err != nil {
			return nil, err
		}
		*env = e
		return func() {
			if err := e.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
			}
		}, nil
	})
}

// MainFunc is a TestMain body for anything more than one environment (two
// clusters, an operator started in-process, ...): it sets up logging, runs
// setup, the package's tests, then teardown, and exits. When setup fails
// the package fails with the reason (and whatever setup had started is its
// own to stop before returning the error).
func MainFunc(m *testing.M, setup func() (teardown func(), err error)) {
	SetupLogging()
	teardown, err := setup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if teardown != nil {
		teardown()
	}
	os.Exit(code)
}

// SetupLogging sends controller-runtime's logs to stderr when CAIRN_TEST_LOG
// is set (e.g. CAIRN_TEST_LOG=debug), and discards them otherwise.
func SetupLogging() {
	lvl := os.Getenv("CAIRN_TEST_LOG")
	if lvl == "" {
		ctrllog.SetLogger(logr.Discard())
		return
	}
	opts := zap.Options{Development: true, DestWriter: os.Stderr}
	if lvl == "debug" {
		opts.Level = zapcore.DebugLevel
	}
	ctrllog.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
}
