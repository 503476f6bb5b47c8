// Package failover_test kills the leading replica of the backup operator and
// checks that the other one takes over without duplicating children.
package failover_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/platform"
)

const leaseName = "backup.operators.cairn.dev"

var k8s client.Client

// Two replicas with leader election; the leader is SIGKILLed (no lease
// release): the other takes over once the lease expires, and reconciles
// without creating a second CronJob. Webhooks are off here: the webhook
// configuration could point at one replica only.
func TestLeaderKilledOtherTakesOver(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	g := NewWithT(t)
	ctx := context.Background()
	root, err := cluster.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	// Build before starting the cluster: a slow build must not eat into the
	// cluster's life.
	bin, err := platform.Build(ctx, root, t.TempDir(), "backup")
	g.Expect(err).NotTo(HaveOccurred())
	env, err := platform.Up(ctx, platform.Options{Root: root, Dir: t.TempDir(), Nodes: 1, Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred())
	k8s = env.Client
	var replicas []*platform.Operator
	t.Cleanup(func() {
		for _, r := range replicas {
			if t.Failed() {
				t.Logf("--- %s log\n%s", r.Name, r.Tail(40))
			}
			_ = r.Stop()
		}
		if t.Failed() {
			env.Cluster.DumpLogs(t.Logf)
		}
		_ = env.Down()
	})
	undo := env.Cluster.StopOnSignal(func() {
		for _, r := range replicas {
			_ = r.Kill()
		}
	})
	t.Cleanup(undo)

	args := []string{"--leader-elect", "--leader-election-namespace", "default",
		"--leader-lease-duration", "6s", "--leader-renew-deadline", "4s", "--leader-retry-period", "1s"}
	for i := range 2 {
		op, err := env.StartOperator(ctx, "backup", bin, false, fmt.Sprintf("-%d", i), args)
		g.Expect(err).NotTo(HaveOccurred())
		replicas = append(replicas, op)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	first := backupJob(ns.Name, "before")
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Eventually(func() int { return cronJobs(g, ns.Name, first.Name) }).WithTimeout(time.Minute).Should(Equal(1))

	holder := func() string {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: leaseName}, l); err != nil {
			return ""
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	var leaderHolder string
	g.Eventually(func() string { leaderHolder = holder(); return leaderHolder }).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
	// The leader is the replica whose log says it acquired the lease.
	var leader, other *platform.Operator
	g.Eventually(func() int {
		leader, other = nil, nil
		n := 0
		for _, r := range replicas {
			if strings.Contains(strings.ToLower(r.Tail(10000)), "successfully acquired lease") {
				leader, n = r, n+1
			} else {
				other = r
			}
		}
		return n
	}).WithTimeout(30*time.Second).Should(Equal(1), "exactly one replica acquired the lease")

	killed := time.Now()
	g.Expect(leader.Kill()).To(Succeed())
	g.Eventually(func() string { return holder() }).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).
		ShouldNot(Or(Equal(leaderHolder), BeEmpty()))
	t.Logf("takeover: %s after SIGKILL of the leader (lease duration 6s)", time.Since(killed).Round(100*time.Millisecond))
	g.Eventually(func() string { return strings.ToLower(other.Tail(10000)) }).WithTimeout(30 * time.Second).Should(ContainSubstring("successfully acquired lease"))

	// The new leader reconciles new and old objects and duplicates nothing.
	second := backupJob(ns.Name, "after")
	g.Expect(env.Client.Create(ctx, second)).To(Succeed())
	g.Eventually(func() int { return cronJobs(g, ns.Name, second.Name) }).WithTimeout(time.Minute).Should(Equal(1))
	g.Consistently(func() []int {
		return []int{cronJobs(g, ns.Name, first.Name), cronJobs(g, ns.Name, second.Name)}
	}).WithTimeout(5 * time.Second).Should(Equal([]int{1, 1}))
	g.Eventually(func() backupv1.Phase {
		got := &backupv1.BackupJob{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), got)).To(Succeed())
		return got.Status.Phase
	}).WithTimeout(30 * time.Second).Should(Equal(backupv1.PhaseScheduled))
}

func cronJobs(g Gomega, ns, name string) int {
	l := &batchv1.CronJobList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"backup.cairn.dev/backupjob": name})).To(Succeed())
	return len(l.Items)
}

func backupJob(ns, name string) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: "postgres", Host: "db.example", Port: 5432, Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Schedule: "0 0 1 1 *", TimeZone: "Asia/Shanghai", RetentionDays: 7,
			MaxRetries: ptr.To[int32](1), ActiveDeadlineSeconds: ptr.To[int64](600),
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "http://s3.example:9000", Bucket: "backups",
				Region: "us-east-1", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}
}
