package soak

import (
	"slices"
	"testing"
	"time"
)

var operators = []string{"backup", "migration", "orchestrator", "restore"}

func TestPlanIsSeededAndCoversEveryKind(t *testing.T) {
	for _, d := range []time.Duration{60 * time.Second, 90 * time.Second, 100 * time.Second, 150 * time.Second, 3 * time.Minute, 30 * time.Minute} {
		a, b := Plan(42, d, operators), Plan(42, d, operators)
		if !slices.Equal(a, b) {
			t.Fatalf("%s: the same seed gave two schedules:\n%v\n%v", d, a, b)
		}
		if c := Plan(43, d, operators); slices.Equal(a, c) {
			t.Errorf("%s: seeds 42 and 43 gave the same schedule %v", d, a)
		}
		seen := map[FaultKind]bool{}
		lead, tail := min(time.Minute, d/8), min(S3OutageLength+15*time.Second, d/4)
		for i, f := range a {
			seen[f.Kind] = true
			if f.At < lead || f.At > d-tail {
				t.Errorf("%s: fault %v outside the window", d, f)
			}
			if i > 0 && f.At <= a[i-1].At {
				t.Errorf("%s: faults out of order: %v after %v", d, f, a[i-1])
			}
			if i > 0 && f.At-a[i-1].At < MinFaultGap*3/4 {
				t.Errorf("%s: %v only %s after %v", d, f, f.At-a[i-1].At, a[i-1])
			}
			if (f.Kind == KillLeader || f.Kind == KillStandby) != (f.Operator != "") {
				t.Errorf("%s: %v: an operator only for operator kills", d, f)
			}
		}
		for _, k := range AllFaults {
			if !seen[k] {
				t.Errorf("%s: no %s in %v", d, k, a)
			}
		}
		if d == 30*time.Minute && len(a) < 20 {
			t.Errorf("a 30-minute soak gets %d faults, want at least 20: %v", len(a), a)
		}
	}
	// Whatever the seed, the 60 s soak of `make e2e` plans every kind.
	for seed := int64(0); seed < 200; seed++ {
		seen := map[FaultKind]bool{}
		for _, f := range Plan(seed, 60*time.Second, operators) {
			seen[f.Kind] = true
		}
		if len(seen) != len(AllFaults) {
			t.Errorf("60s, seed %d: %d kind(s) of %d planned: %v", seed, len(seen), len(AllFaults), Plan(seed, 60*time.Second, operators))
		}
	}
	if p := Plan(1, 10*time.Second, operators); len(p) != 2 {
		t.Errorf("a 10 s soak gets two faults (at least MinFaultGap*3/4 apart in a 6 s window): %v", p)
	}
}
