package main

// The recovery-time step (issue 26): a ProtectionPlan over a sizable
// database, its measured RTO (status.restoreDuration: how long its newest
// verification's restore took) first with one stream, then after the user
// sets spec.backup.parallelism: 2 — the next backup is stored in parts and
// its verification loads the tables over two connections while they
// download and builds the indexes beside the loads.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/test/dataset"
	platformv1 "cairn.dev/apis/platform/v1"
)

const (
	rtoPlan   = "orders-history"
	rtoDB     = "orders_history"
	rtoTables = 4
)

// rtoRun is one verification of the recovery-time plan as the demo saw it.
type rtoRun struct {
	parallelism int64
	artifact    string
	restoreJob  string
	duration    time.Duration
}

// runRTO creates the database (mb MB), applies the plan with parallelism 1,
// has it back up and verify once, sets parallelism 2, and once more; then
// prints both measured restore durations. mb 0 skips the step.
func runRTO(ctx context.Context, c client.Client, pl *planeState, s *samples, mb int, timeout time.Duration) error {
	if mb <= 0 {
		logf("recovery-time step skipped (DEMO_RTO_MB=0)")
		return nil
	}
	fmt.Printf("\nRecovery time: a ProtectionPlan's measured RTO with one stream, then in parallel\n")
	seeded := time.Now()
	size, err := dataset.Postgres(pl.Postgres, rtoDB, rtoTables, int64(mb)<<20)
	if err != nil {
		return fmt.Errorf("creating the recovery-time database %s: %w", rtoDB, err)
	}
	logf("created database %s on the local PostgreSQL 15: %d tables, %d MB in all (rows, a primary key and two secondary indexes each), in %s",
		rtoDB, rtoTables, size>>20, time.Since(seeded).Round(time.Second))
	plan, err := rtoPlanObject(s.plan)
	if err != nil {
		return err
	}
	var runs []rtoRun
	for i, par := range []int64{1, 2} {
		if err := unstructured.SetNestedField(plan.Object, par, "spec", "backup", "parallelism"); err != nil {
			return err
		}
		if err := apply(ctx, c, plan); err != nil {
			return err
		}
		prev := ""
		if i > 0 {
			prev = runs[i-1].artifact
		}
		logf("protectionplan/%s: spec.backup.parallelism %d; backup requested now, its verification follows (verification.everyNBackups: 1)", rtoPlan, par)
		r, err := verifyOnce(ctx, c, plan, prev, "demo-rto-"+strconv.FormatInt(time.Now().UnixNano(), 10), timeout)
		if err != nil {
			return err
		}
		r.parallelism = par
		logf("protectionplan/%s: verified %s by restorejob/%s: restore duration (measured RTO) %s", rtoPlan, r.artifact, r.restoreJob, r.duration)
		runs = append(runs, r)
	}
	fmt.Printf("protectionplan/%s (%s, %d MB): measured RTO\n", rtoPlan, rtoDB, size>>20)
	for _, r := range runs {
		format := "one file, restored in one stream (one transaction)"
		if strings.Contains(r.artifact, ".parts") {
			format = fmt.Sprintf("in parts, restored %d at a time into the new scratch database", r.parallelism)
		}
		fmt.Printf("  parallelism %d: %-8s %s (%s)\n", r.parallelism, r.duration, format, r.artifact)
	}
	if a, b := runs[0].duration, runs[1].duration; a > 0 && b > 0 {
		fmt.Printf("  parallelism 2 restores in %.0f%% of the one-stream time (%.2f×); one run each, on this machine's %s — the verification's pod start is included\n",
			100*float64(b)/float64(a), float64(a)/float64(b), cpuNote())
	}
	return nil
}

// rtoPlanObject is the sample plan (already mapped to the local servers)
// turned to the recovery-time database: its own name, S3 prefix and scratch
// database; backups only when the demo asks (the schedule stays nightly);
// every backup verified; the row-count check only (the sample's other check
// reads the orders table); no migration.
func rtoPlanObject(sample *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	p := sample.DeepCopy()
	p.SetName(rtoPlan)
	p.SetResourceVersion("")
	p.SetAnnotations(nil)
	unstructured.RemoveNestedField(p.Object, "spec", "migration")
	unstructured.RemoveNestedField(p.Object, "spec", "verification", "schedule")
	for _, f := range []struct {
		v    any
		path []string
	}{
		{rtoDB, []string{"spec", "database", "database"}},
		{"0 2 * * *", []string{"spec", "backup", "schedule"}},
		{"orders-history-plan", []string{"spec", "backup", "storage", "s3", "prefix"}},
		{rtoDB + "_verify", []string{"spec", "verification", "restoreInto", "database"}},
		{int64(1), []string{"spec", "verification", "everyNBackups"}},
		{[]any{map[string]any{"name": "row-counts", "rowCountsMatchBackup": true}}, []string{"spec", "verification", "checks"}},
	} {
		if err := unstructured.SetNestedField(p.Object, f.v, f.path...); err != nil {
			return nil, fmt.Errorf("protectionplan/%s: %v: %w", rtoPlan, f.path, err)
		}
	}
	return p, nil
}

// verifyOnce asks the plan's BackupJob for a backup now and waits until the
// plan has verified an artifact other than prev; it returns that
// verification. A failed verification is an error.
func verifyOnce(ctx context.Context, c client.Client, plan *unstructured.Unstructured, prev, runNow string, timeout time.Duration) (rtoRun, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := requestPlanRun(ctx, c, plan, runNow); err != nil {
		return rtoRun{}, err
	}
	key := client.ObjectKey{Namespace: plan.GetNamespace(), Name: plan.GetName()}
	p := &platformv1.ProtectionPlan{}
	for {
		if err := c.Get(ctx, key, p); err != nil {
			return rtoRun{}, err
		}
		lv := p.Status.LastVerification
		if lv != nil && lv.Artifact.Path != prev {
			switch lv.Result {
			case platformv1.VerificationSucceeded:
				if lv.RestoreDuration != nil {
					return rtoRun{artifact: lv.Artifact.Path, restoreJob: lv.RestoreJob, duration: lv.RestoreDuration.Duration}, nil
				}
			case platformv1.VerificationFailed:
				return rtoRun{}, fmt.Errorf("protectionplan/%s: the verification of %s failed: %s (see restorejob/%s)", key.Name, lv.Artifact.Path, lv.Message, lv.RestoreJob)
			}
		}
		select {
		case <-ctx.Done():
			return rtoRun{}, fmt.Errorf("waiting for protectionplan/%s to back up and verify: %w", key.Name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// cpuNote says what the figures were measured on: the CPUs and the load
// average (the demo's every-minute backups and its archiver run meanwhile).
func cpuNote() string {
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	return fmt.Sprintf("%d CPUs, load average %s", runtime.NumCPU(), load)
}
