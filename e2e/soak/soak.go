// Package soak runs Cairn's installed platform for a while under the demo's
// workload at a higher rate while a seeded random schedule breaks things,
// then checks what must hold whatever happened, and prints it (issue 28).
//
// The workload (workload.go): a PostgreSQL and a MariaDB BackupJob every
// minute (real servers, S3 through a gate the schedule can close), a
// ProtectionPlan backing up every minute and verifying every backup,
// RestoreJobs of the newest backups in turn (each target compared with its
// source), a Continuous MigrationJob under a write load. The faults
// (faults.go, inject.go): operator containers SIGKILLed (the Lease's holder
// and its standby), agent containers SIGKILLed mid-backup and mid-restore,
// kube-apiserver and etcd SIGKILLed and started again, S3 unreachable for
// a minute. The invariants (invariants.go) read only what the recorder and
// the end of the run collected (record.go), so each can be shown to fail on
// a bad history without a cluster.
package soak

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"cairn.dev/e2e/install"
)

// Config of a soak.
type Config struct {
	// Duration of the fault phase (the workload runs from set-up to the end).
	Duration time.Duration
	// Seed of the fault schedule.
	Seed int64
	// Namespace of the workload (created).
	Namespace string
	// RestoreEvery: a RestoreJob is created this often (default: every
	// 2 minutes, every 45 s in a soak shorter than 10 minutes).
	RestoreEvery time.Duration
	// Logf receives progress lines.
	Logf func(string, ...any)
}

// Report is what a soak did and found.
type Report struct {
	Seed             int64
	Duration         time.Duration
	Start, End       time.Time
	Plan             []Fault
	Faults           []FaultResult
	Invariants       []Invariant
	LoadAverages     []string
	Polls, PollsLost int
	Markers          int
}

// OK says whether every invariant held.
func (r *Report) OK() bool {
	for _, i := range r.Invariants {
		if !i.OK {
			return false
		}
	}
	return len(r.Invariants) > 0
}

func joinFaults(fs []FaultResult) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return strings.Join(out, "\n  ")
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, %s of faults from %s to %s UTC (whole run to %s)\n", r.Seed, r.Duration,
		clock(r.Start), clock(r.Start.Add(r.Duration)), clock(r.End))
	fmt.Fprintf(&b, "load average (1, 5, 15 min) each minute: %s\n", strings.Join(r.LoadAverages, " | "))
	fmt.Fprintf(&b, "faults (%d planned):\n", len(r.Plan))
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	fmt.Fprintf(&b, "recorder: %d polls, %d failed (the control plane away); %d in-progress marker(s) left in the store by killed runs\n",
		r.Polls, r.PollsLost, r.Markers)
	fmt.Fprintf(&b, "invariants:\n")
	for _, i := range r.Invariants {
		fmt.Fprintf(&b, "  %s\n", strings.ReplaceAll(i.String(), "\n", "\n  "))
	}
	verdict := "every invariant held"
	if !r.OK() {
		verdict = "AN INVARIANT FAILED"
	}
	fmt.Fprintf(&b, "soak: %s (seed %d)\n", verdict, r.Seed)
	return b.String()
}

// Run runs the soak on env (the installed platform with RealData) and
// returns its report; an error is a soak that could not run (set-up), not
// a failed invariant.
func Run(ctx context.Context, env *install.Env, cfg Config) (*Report, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "soak"
	}
	if cfg.RestoreEvery == 0 {
		cfg.RestoreEvery = 2 * time.Minute
		if cfg.Duration < 10*time.Minute {
			cfg.RestoreEvery = 45 * time.Second
		}
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	operators := install.OperatorNames(env.Manifests)
	rep := &Report{Seed: cfg.Seed, Duration: cfg.Duration, Plan: Plan(cfg.Seed, cfg.Duration, operators)}
	gate, err := NewGate(env.Servers.S3.Endpoint())
	if err != nil {
		return nil, err
	}
	defer gate.Close()
	rec := newRecorder(env.Client, cfg.Namespace)
	w := &workload{env: env, ns: cfg.Namespace, s3: gate.Endpoint(), rec: rec, logf: logf, pending: map[string]string{}}
	recCtx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	go rec.run(recCtx, 2*time.Second)
	if err := w.setUp(ctx, cfg.Duration); err != nil {
		return nil, err
	}
	defer w.load.Stop()

	h := &History{RSSFactor: 1.5, RSSSlack: 24 << 20}
	rep.Start = time.Now()
	logf("soak: %s of faults from now (seed %d); the schedule: %v", cfg.Duration, cfg.Seed, rep.Plan)
	// An agent kill waits long enough to see a minute begin (the backups'
	// schedule).
	inj := &injector{env: env, gate: gate, namespace: cfg.Namespace, logf: logf, agentWait: 75 * time.Second, killed: map[string]bool{}}
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	faultsDone := make(chan []FaultResult, 1)
	go func() { faultsDone <- inj.run(faultCtx, rep.Start, rep.Plan) }()
	restoreCtx, stopRestores := context.WithCancel(ctx)
	defer stopRestores()
	go w.restoreLoop(restoreCtx, cfg.RestoreEvery)

	// Every minute: the load average and the operators' memory.
	end := rep.Start.Add(cfg.Duration)
	for {
		rep.LoadAverages = append(rep.LoadAverages, clock(time.Now())+" "+loadAverage())
		if s, err := sampleRSS(ctx, env, operators); err == nil {
			h.RSS = append(h.RSS, s...)
		}
		if !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(time.Minute, time.Until(end))):
		}
	}
	logf("soak: fault phase over; waiting for the faults under way (an S3 outage, an agent kill waiting for its pod)")
	rep.Faults = <-faultsDone
	stopRestores()
	if err := gate.Up(); err != nil {
		return nil, err
	}
	if err := w.finish(ctx, h, rec, inj, stopRec); err != nil {
		inj.mu.Lock()
		killed := maps.Clone(inj.killed)
		inj.mu.Unlock()
		return nil, fmt.Errorf("%w\nfaults:\n  %s\n%s", err, joinFaults(rep.Faults), diagnose(ctx, env, killed))
	}
	rep.Polls, rep.PollsLost = rec.counts()
	var markers int
	h.Store, markers, err = readStore(ctx, env.Servers.S3.Client(), install.Bucket,
		[]string{"soak-" + pgBackup, "soak-" + mariaBackup, "soak-plan"})
	if err != nil {
		return nil, err
	}
	rep.Markers = markers
	if err := w.tearDown(ctx, h); err != nil {
		return nil, err
	}
	rep.End = time.Now()
	rep.LoadAverages = append(rep.LoadAverages, clock(rep.End)+" "+loadAverage())
	rep.Invariants = Check(h)
	return rep, nil
}
