// Package backup_test runs the backup and restore operators as local
// processes against a full control plane (kwok for kubelets) and checks what
// only the real controllers decide: CronJobs firing on schedule, Job retries,
// garbage collection, webhooks served over TLS.
package backup_test

import (
	"os"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/platform"
)

var env *platform.Env

func TestMain(m *testing.M) {
	// The RestoreJob test needs both operators.
	os.Exit(platform.RunTests(m, platform.Options{Nodes: 2, Operators: []string{"backup", "restore"}}, &env))
}

// namespace creates a namespace for one test with the Secrets its
// BackupJobs name.
func namespace(t *testing.T) string { return fixtures.Namespace(t, env.Client, "e2e-") }

// yearly never fires during a test: runs come from run-now.
const yearly = fixtures.Yearly

// backupJob has every field set: nothing depends on defaulting.
func backupJob(ns, name, schedule, host string, maxRetries int32) *backupv1.BackupJob {
	return fixtures.BackupJob(ns, name, schedule, host, maxRetries)
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
