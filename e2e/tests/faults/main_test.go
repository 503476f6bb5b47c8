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

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/platform"
)

// leaseName and leaseNamespace: the backup operator's Lease where the
// platform runs it (its Deployment's namespace).
const (
	leaseName      = "backup.operators.cairn.dev"
	leaseNamespace = "cairn-system"
)

var (
	env *platform.Env
	k8s client.Client
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	root, err := cluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "cairn-e2e-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Build before starting the cluster: a slow build must not eat into the
	// cluster's life.
	if _, err := platform.Build(ctx, root, dir+"/bin", "backup"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = platform.Up(ctx, platform.Options{Root: root, Dir: dir, Nodes: 1,
		Logf: func(f string, a ...any) { fmt.Printf("e2e: "+f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	k8s = env.Client
	undo := env.Cluster.StopOnSignal(func() {
		for _, op := range env.Processes {
			_ = op.Kill()
		}
	})
	code := m.Run()
	undo()
	if code != 0 {
		env.Cluster.DumpLogs(func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
	}
	if err := env.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping:", err)
	}
	return code
}

// startBackup starts a backup-operator process for the test; it is stopped
// (SIGTERM: the lease is released) when the test ends.
func startBackup(t *testing.T, suffix string, extra ...string) *platform.Operator {
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
func namespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-faults-"}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		StringData: map[string]string{"username": "app", "password": "e2e"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "s3"},
		StringData: map[string]string{"accessKeyID": "e2e", "secretAccessKey": "e2e-secret"}})).To(Succeed())
	return ns.Name
}

// yearly never fires during a test.
const yearly = "0 0 1 1 *"

func backupJob(ns, name, schedule string) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: "postgres", Host: "db.example", Port: 5432, Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Schedule: schedule, TimeZone: "Asia/Shanghai", RetentionDays: 7,
			MaxRetries: ptr.To[int32](1), ActiveDeadlineSeconds: ptr.To[int64](600),
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "http://s3.example:9000", Bucket: "backups",
				Region: "us-east-1", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}
}

func getBJ(g Gomega, bj *backupv1.BackupJob) *backupv1.BackupJob {
	got := &backupv1.BackupJob{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(bj), got)).To(Succeed())
	return got
}

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
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
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

func setRunNow(g Gomega, bj *backupv1.BackupJob, id string) {
	g.Eventually(func() error {
		got := &backupv1.BackupJob{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(bj), got); err != nil {
			return err
		}
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[backupv1.RunNowAnnotation] = id
		return k8s.Update(ctx, got)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// acquiredLease says whether op's log shows it became the leader.
func acquiredLease(op *platform.Operator) bool {
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
