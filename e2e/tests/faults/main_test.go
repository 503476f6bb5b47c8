// Package faults_test breaks things under the backup operator on a full
// control plane — the leader SIGKILLed, an operator killed mid-work and
// restarted, kube-apiserver restarted — and checks that it converges without
// duplicating children or losing runs.
//
// One cluster with the platform installed serves the package; each test starts
// (and stops) its own operator processes and uses its own namespace.
package faults_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

// leaseName and leaseNamespace: the backup operator's Lease where the
// platform runs it (its Deployment's namespace).
const (
	leaseName      = "backup.operators.cairn.dev"
	leaseNamespace = "cairn-system"
)

var (
	env *install.Env
	k8s client.Client
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	// Each test starts its own backup-operator processes.
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, Binaries: []string{"backup"}}, &env,
		func(e *install.Env) { k8s = e.Client }))
}

// startBackup starts a backup-operator process for the test; it is stopped
// (SIGTERM: the lease is released) when the test ends.
func startBackup(t *testing.T, suffix string, extra ...string) *install.Operator {
	t.Helper()
	op, err := env.StartOperator(ctx, "backup", suffix, extra)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- %s log (last 40 lines)\n%s", op.Name, op.Tail(40))
		}
		_ = op.Stop()
	})
	return op
}

// shortLease makes a SIGKILLed leader's lease expire quickly.
var shortLease = []string{"--leader-lease-duration=6s", "--leader-renew-deadline=4s", "--leader-retry-period=1s"}

// namespace creates a namespace with the Secrets the BackupJobs name.
func namespace(t *testing.T) string { return fixtures.Namespace(t, k8s, "e2e-faults-") }

const yearly = fixtures.Yearly

func backupJob(ns, name, schedule string) *backupv1.BackupJob {
	return fixtures.BackupJob(ns, name, schedule, "db.example", 1)
}

func getBJ(g Gomega, bj *backupv1.BackupJob) *backupv1.BackupJob { return fixtures.Get(g, k8s, bj) }

// cronJobs counts the CronJobs of BackupJob name in ns.
func cronJobs(g Gomega, ns, name string) int {
	l := &batchv1.CronJobList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"backup.cairn.dev/backupjob": name})).To(Succeed())
	return len(l.Items)
}

// jobs lists the Jobs of BackupJob name in ns.
func jobs(g Gomega, ns, name string) []batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"backup.cairn.dev/backupjob": name})).To(Succeed())
	return l.Items
}

// scheduledAt is when the CronJob controller scheduled Job j (zero for a Job
// it did not create).
func scheduledAt(j batchv1.Job) time.Time {
	t, _ := time.Parse(time.RFC3339, j.Annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"])
	return t
}

func finished(j batchv1.Job) bool {
	return fixtures.JobHas(j, batchv1.JobComplete) || fixtures.JobHas(j, batchv1.JobFailed)
}

// recordedRuns counts, per Job name, the BackupSucceeded/BackupFailed Events
// of BackupJobs in ns: the operator emits one when it folds a finished run
// into status.
func recordedRuns(g Gomega, ns string) map[string]int {
	l := &eventsv1.EventList{}
	g.Expect(k8s.List(ctx, l, client.InNamespace(ns))).To(Succeed())
	out := map[string]int{}
	for _, e := range l.Items {
		if (e.Reason == "BackupSucceeded" || e.Reason == "BackupFailed") && e.Related != nil {
			n := int32(1)
			if e.Series != nil {
				n = e.Series.Count
			}
			out[e.Related.Name] += int(n)
		}
	}
	return out
}

func setRunNow(g Gomega, bj *backupv1.BackupJob, id string) { fixtures.SetRunNow(g, k8s, bj, id) }

// acquiredLease says whether op's log shows it became the leader.
func acquiredLease(op *install.Operator) bool {
	return strings.Contains(strings.ToLower(op.Tail(100000)), "successfully acquired lease")
}

func names(js []batchv1.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	slices.Sort(out)
	return out
}

// withRunNow sets a run-now request on bj before it is created.
func withRunNow(bj *backupv1.BackupJob, id string) *backupv1.BackupJob {
	bj.Annotations = map[string]string{backupv1.RunNowAnnotation: id}
	return bj
}

// converged lists what is not yet as it must end for each BackupJob: one
// CronJob, exactly the run-now Jobs wantJobs, status for its generation with
// the last run recorded as Succeeded.
func converged(g Gomega, bjs []*backupv1.BackupJob, wantJobs int) []string {
	var problems []string
	for _, bj := range bjs {
		got := getBJ(g, bj)
		js := jobs(g, bj.Namespace, bj.Name)
		switch {
		case cronJobs(g, bj.Namespace, bj.Name) != 1:
			problems = append(problems, fmt.Sprintf("%s: %d CronJobs", bj.Name, cronJobs(g, bj.Namespace, bj.Name)))
		case len(js) != wantJobs:
			problems = append(problems, fmt.Sprintf("%s: Jobs %v", bj.Name, names(js)))
		case got.Status.ObservedGeneration != got.Generation:
			problems = append(problems, fmt.Sprintf("%s: observedGeneration %d of %d", bj.Name, got.Status.ObservedGeneration, got.Generation))
		case wantJobs > 0 && (got.Status.LastRunName != js[len(js)-1].Name || got.Status.LastResult != backupv1.RunSucceeded):
			problems = append(problems, fmt.Sprintf("%s: last run %q %q, Jobs %v", bj.Name, got.Status.LastRunName, got.Status.LastResult, names(js)))
		}
	}
	return problems
}
