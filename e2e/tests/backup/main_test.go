// Package backup_test runs the backup and restore operators as local
// processes against a full control plane and checks what only the real
// controllers decide: CronJobs firing on schedule, Job retries, garbage
// collection, webhooks served over TLS. Agent pods are real (the pod
// runner's node, the agent image, a real PostgreSQL and S3): a run fails
// because its database host does not resolve, not because a fake says so.
package backup_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

var env *install.Env

// dbHost is where the harness's PostgreSQL listens; appDB is the database
// every BackupJob here backs up (a small shop, made once).
const (
	dbHost = "127.0.0.1"
	appDB  = "app"
)

var seedErr error

func TestMain(m *testing.M) {
	// The RestoreJob test needs both operators.
	os.Exit(install.RunTests(m, install.Options{Nodes: 1, RealData: true, Operators: []string{"backup", "restore"}}, &env,
		func(e *install.Env) { seedErr = dbcheck.SeedPostgres(e.Servers.Postgres, appDB, 100) }))
}

// namespace creates a namespace for one test with the Secrets its
// BackupJobs name, holding the harness's servers' credentials.
func namespace(t *testing.T) string {
	t.Helper()
	if seedErr != nil {
		t.Fatalf("creating database %s: %v", appDB, seedErr)
	}
	g := NewWithT(t)
	ns := fixtures.Namespace(t, env.Client, "e2e-")
	for name, data := range map[string]map[string]string{
		"db": {"username": install.PostgresUser, "password": install.PostgresPassword},
		"s3": {"accessKeyID": install.S3AccessKey, "secretAccessKey": install.S3SecretKey},
	} {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sec)).To(Succeed())
		sec.StringData = data
		g.Expect(env.Client.Update(context.Background(), sec)).To(Succeed())
	}
	return ns
}

// yearly never fires during a test: runs come from run-now.
const yearly = fixtures.Yearly

// backupJob has every field set: nothing depends on defaulting. It backs up
// appDB on host (dbHost, or a host that does not resolve) to the harness's
// S3 server, under the namespace as prefix.
func backupJob(ns, name, schedule, host string, maxRetries int32) *backupv1.BackupJob {
	bj := fixtures.BackupJob(ns, name, schedule, host, maxRetries)
	bj.Spec.Database.Port = int32(env.Servers.Postgres.Port)
	bj.Spec.Database.Database = appDB
	bj.Spec.Storage.S3.Endpoint = env.Servers.S3.Endpoint()
	bj.Spec.Storage.S3.Insecure = true
	bj.Spec.Storage.S3.Bucket = install.Bucket
	bj.Spec.Storage.S3.Prefix = ns
	return bj
}

func get(g Gomega, bj *backupv1.BackupJob) func() backupv1.BackupJobStatus {
	return func() backupv1.BackupJobStatus { return fixtures.Get(g, env.Client, bj).Status }
}

func mustGet(g Gomega, bj *backupv1.BackupJob) *backupv1.BackupJob {
	return fixtures.Get(g, env.Client, bj)
}

func jobsOf(g Gomega, bj *backupv1.BackupJob, extra client.MatchingLabels) []batchv1.Job {
	return fixtures.Jobs(g, env.Client, bj, extra)
}

func setRunNow(t *testing.T, bj *backupv1.BackupJob, id string) {
	t.Helper()
	fixtures.SetRunNow(NewWithT(t), env.Client, bj, id)
}
