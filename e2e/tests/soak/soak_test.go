// Package soak_test runs the soak of e2e/soak on the installed platform
// (every operator's Deployment, two replicas, as containers of its image;
// agent pods on the pod runner; real PostgreSQL, MariaDB and S3): the demo's
// workload at a higher rate under a seeded random fault schedule, then the
// invariants, printed.
//
//	SOAK_DURATION (default 100s here; `make soak` sets 30m) and SOAK_SEED
//	(default: the clock; printed, so a run can be repeated).
package soak_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"cairn.dev/e2e/install"
	"cairn.dev/e2e/soak"
)

var env *install.Env

func TestMain(m *testing.M) {
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, RealData: true, Installed: true}, &env))
}

// DefaultDuration is the soak's length in `make e2e` (CI). At least 90 s:
// the scheduled-runs invariant counts the minutes between the CronJobs'
// creation and 30 s before the backups are suspended (after the faults),
// and needs one; a 60 s soak had none in about 4 runs of 10 (seen: seed
// 940533, "0 minute(s) due").
const DefaultDuration = 100 * time.Second

func TestSoak(t *testing.T) {
	d := DefaultDuration
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("SOAK_DURATION=%q: %v", s, err)
		}
	}
	seed := time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
	}
	t.Logf("soak: SOAK_DURATION=%s SOAK_SEED=%d", d, seed)
	rep, err := soak.Run(context.Background(), env, soak.Config{Duration: d, Seed: seed, Logf: t.Logf})
	if err != nil {
		t.Fatalf("the soak could not run (seed %d): %v", seed, err)
	}
	t.Logf("\n%s", rep)
	if !rep.OK() {
		t.Errorf("an invariant failed (repeat with SOAK_SEED=%d SOAK_DURATION=%s)", seed, d)
	}
}
