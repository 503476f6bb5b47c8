// Package backup_test runs the backup and restore operators as local
// processes against a full control plane (kwok for kubelets) and checks what
// only the real controllers decide: CronJobs firing on schedule, Job retries,
// garbage collection, webhooks served over TLS.
package backup_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
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

var env *platform.Env

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
	dir, err := os.MkdirTemp("", "cairn-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	env, err = platform.Up(context.Background(), platform.Options{
		Root: root, Dir: dir, Nodes: 2, Operators: []string{"backup", "restore"}, // the RestoreJob test needs both
		Logf: func(f string, a ...any) { fmt.Printf("e2e: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Printf("e2e: platform up in %s (cluster %s)\n", time.Since(start).Round(time.Millisecond), env.Cluster.Started.Round(time.Millisecond))
	undo := env.Cluster.StopOnSignal(func() {
		for _, op := range env.Operators {
			_ = op.Kill()
		}
	})
	code := m.Run()
	undo()
	if code != 0 {
		env.Cluster.DumpLogs(func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
		for _, op := range env.Operators {
			fmt.Printf("--- %s operator log (last 60 lines)\n%s\n", op.Name, op.Tail(60))
		}
	}
	if err := env.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping:", err)
	}
	return code
}

// namespace creates a namespace for one test with the database credentials
// Secret its BackupJobs name.
func namespace(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "db"},
		StringData: map[string]string{"username": "app", "password": "e2e"}}
	g.Expect(env.Client.Create(ctx, sec)).To(Succeed())
	s3 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "s3"},
		StringData: map[string]string{"accessKeyID": "e2e", "secretAccessKey": "e2e-secret"}}
	g.Expect(env.Client.Create(ctx, s3)).To(Succeed())
	return ns.Name
}

// yearly never fires during a test: runs come from run-now.
const yearly = "0 0 1 1 *"

// backupJob has every field set: nothing depends on defaulting.
func backupJob(ns, name, schedule, host string, maxRetries int32) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: "postgres", Host: host, Port: 5432, Database: "app",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
			Schedule:              schedule,
			TimeZone:              "Asia/Shanghai",
			RetentionDays:         7,
			MaxRetries:            ptr.To(maxRetries),
			ActiveDeadlineSeconds: ptr.To[int64](600),
			// S3 rather than a PVC: a pod with an unbound claim is never scheduled.
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "http://s3.example:9000", Bucket: "backups",
				Region: "us-east-1", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}
}

func get(g Gomega, bj *backupv1.BackupJob) func() backupv1.BackupJobStatus {
	return func() backupv1.BackupJobStatus {
		got := &backupv1.BackupJob{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(bj), got)).To(Succeed())
		return got.Status
	}
}

func jobsOf(g Gomega, bj *backupv1.BackupJob, extra client.MatchingLabels) []batchv1.Job {
	sel := client.MatchingLabels{"backup.cairn.dev/backupjob": bj.Name}
	for k, v := range extra {
		sel[k] = v
	}
	list := &batchv1.JobList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(bj.Namespace), sel)).To(Succeed())
	return list.Items
}

func setRunNow(t *testing.T, bj *backupv1.BackupJob, id string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		got := &backupv1.BackupJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bj), got); err != nil {
			return err
		}
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[backupv1.RunNowAnnotation] = id
		return env.Client.Update(context.Background(), got)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
