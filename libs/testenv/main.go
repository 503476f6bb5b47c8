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
	SetupLogging()
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
