package plugin_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/dbcheck"
	"cairn.dev/e2e/fixtures"
)

func itoa(n int) string { return strconv.Itoa(n) }

// The on-call path on one BackupJob of a real PostgreSQL database backed up
// to S3: `backup --wait` runs exactly one Job per call and prints its
// artifact; `backups` lists exactly the artifacts in the store, with the
// sizes and checksums of their bytes (read by the test's own S3 client);
// `restore --into --wait` restores into another database, whose tables then
// equal the source's, and prints the checked row counts; `restore` into the
// source itself is refused before anything is created; `status` and `logs`
// show the runs; a missing name and a user without the right get clear
// errors.
func TestBackupListRestoreAsATenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := tenantNamespace(t)
	src, dst := dbName(ns, "shop"), dbName(ns, "shop_restored")
	want := seed(t, src)

	bj := fixtures.BackupJob(ns, "shop", fixtures.Yearly, "127.0.0.1", 1)
	bj.Spec.Database = postgresRef(src)
	bj.Spec.Storage = s3Storage(ns)
	bj.Spec.TimeZone = "Asia/Shanghai"
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())

	// backup: one run per call, followed to its artifact.
	out := ok(t, "alice", ns, "backup", "shop", "--wait", "--timeout", "4m")
	g.Expect(out).To(ContainSubstring("backupjob/shop: backup succeeded: "))
	runNow := func() int {
		return len(fixtures.Jobs(g, env.Client, bj, client.MatchingLabels{"backup.cairn.dev/run": "run-now"}))
	}
	g.Expect(runNow()).To(Equal(1), "one call, exactly one Job")
	st := fixtures.Get(g, env.Client, bj).Status
	g.Expect(out).To(ContainSubstring(st.LastArtifact.Path))
	first := st.LastArtifact.Path
	// --at takes whole seconds and artifact times are listed in whole
	// seconds: a second strictly after the first backup ended, and the
	// second backup starting in a later second. Each wait can take a whole
	// second (a time truncated to its second, reached just after the
	// boundary): fixtures.WaitPast, not Gomega's 1 s default timeout.
	fixtures.WaitPast(t, st.LastSuccessfulTime.Add(time.Second))
	at := time.Now().UTC().Truncate(time.Second)
	between := at.Format(time.RFC3339)
	fixtures.WaitPast(t, at.Add(time.Second))
	ok(t, "alice", ns, "backup", "shop", "--wait", "--timeout", "4m")
	g.Expect(runNow()).To(Equal(2), "a second call, a second Job")
	g.Expect(fixtures.Get(g, env.Client, bj).Status.LastArtifact.Path).NotTo(Equal(first))

	// restore --at: the newest artifact taken at or before the time, from
	// the store's catalog (a server-side dry run: admission accepts it,
	// nothing is created).
	dry := ok(t, "alice", ns, "restore", "shop", "--into", dst, "--at", between, "--dry-run")
	g.Expect(dry).To(ContainSubstring("artifact: " + first))
	g.Expect(dry).To(ContainSubstring("rowCountsMatchBackup: true"))

	// backups: exactly the store's artifacts, sizes and checksums of their bytes.
	var listed struct {
		Count int `json:"count"`
		Items []struct {
			Path, Checksum, Time string
			Size                 int64
			Tables               int
			Rows                 int64
		} `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(ok(t, "alice", ns, "backups", "shop", "-o", "json")), &listed)).To(Succeed())
	inStore := storedArtifacts(t, bj)
	g.Expect(inStore).To(HaveLen(2))
	g.Expect(listed.Count).To(Equal(2))
	g.Expect(listed.Items).To(HaveLen(2))
	var rows int64
	for _, tb := range want {
		rows += tb.Rows
	}
	for _, it := range listed.Items {
		g.Expect(inStore).To(HaveKeyWithValue(it.Path, [2]string{strconv.FormatInt(it.Size, 10), it.Checksum}), "listed %s is the stored object", it.Path)
		g.Expect(it.Time).To(HaveSuffix("CST"), "times in the BackupJob's time zone (Asia/Shanghai)")
		g.Expect(it.Tables).To(Equal(len(want)))
		g.Expect(it.Rows).To(Equal(rows))
	}
	g.Expect(listed.Items[0].Path).To(Equal(fixtures.Get(g, env.Client, bj).Status.LastArtifact.Path), "newest first")
	table := ok(t, "alice", ns, "backups", "shop")
	g.Expect(table).To(HavePrefix("NAME"))
	g.Expect(strings.Count(table, "\n")).To(Equal(3))

	// restore into another database: the tables equal the source's.
	out = ok(t, "alice", ns, "restore", "shop", "--into", dst, "--name", "shop-restore", "--wait", "--timeout", "4m")
	g.Expect(out).To(ContainSubstring("restorejob/shop-restore: Succeeded"))
	g.Expect(out).To(ContainSubstring("check row-counts: passed: " + itoa(len(want)) + " table(s), " + strconv.FormatInt(rows, 10) + " row(s) recorded"))
	got, err := dbcheck.PostgresTables(env.Servers.Postgres, dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "restored tables equal the source (rows and content checksum)")

	// restore into the source itself: refused, nothing created.
	r := cairn(t, "alice", ns, "restore", "shop", "--into", src, "--name", "overwrite")
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring("is the database backupjob/shop backs up"))
	g.Expect(r.stderr).To(ContainSubstring("--allow-overwrite-source"))
	rjs := &restorev1.RestoreJobList{}
	g.Expect(env.Client.List(ctx, rjs, client.InNamespace(ns))).To(Succeed())
	g.Expect(rjs.Items).To(HaveLen(1), "only shop-restore")

	// status: the BackupJob, its last success, its next run.
	var status struct {
		Items []struct {
			Kind, Name, Phase, AttentionLevel string
			LastSuccess                       *time.Time
		} `json:"items"`
	}
	g.Expect(json.Unmarshal([]byte(ok(t, "olga", ns, "status", "-o", "json")), &status)).To(Succeed())
	g.Expect(status.Items).To(HaveLen(1))
	row := status.Items[0]
	g.Expect(row.Kind).To(Equal("BackupJob"))
	g.Expect(row.Phase).To(Equal(string(backupv1.PhaseSucceeded)))
	g.Expect(row.AttentionLevel).To(Equal("ok"))
	g.Expect(row.LastSuccess.Equal(fixtures.Get(g, env.Client, bj).Status.LastSuccessfulTime.Time)).To(BeTrue())
	g.Expect(ok(t, "olga", ns, "status")).To(MatchRegexp(`BackupJob\s+shop\s+Succeeded\s+\S+ ago`))

	// logs: the agent's own log lines of the runs (olga has view).
	logs := ok(t, "olga", ns, "logs", "backupjob/shop", "--runs", "1")
	g.Expect(logs).To(HavePrefix("==> pod/"))
	g.Expect(logs).To(ContainSubstring(`"command":"backup"`))

	// Completion of names (what kubectl_complete-cairn asks for).
	comp, err := exec.Command(plugin, "__complete", "backup", "--kubeconfig", env.Cluster.Kubeconfig, "--as", "alice", "-n", ns, "sh").Output()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(string(comp), "\n")).To(ContainElement("shop"))

	// Clear errors: a name that does not exist; a right the user lacks.
	r = cairn(t, "alice", ns, "backup", "nope")
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring(`backupjobs "nope" not found (kubectl cairn status lists what exists)`))
	r = cairn(t, "olga", ns, "backup", "shop")
	g.Expect(r.code).To(Equal(1))
	g.Expect(r.stderr).To(ContainSubstring("forbidden"))
	g.Expect(r.stderr).To(ContainSubstring("you lack this right"))
	g.Expect(runNow()).To(Equal(2), "a refused call starts nothing")
	r = cairn(t, "olga", ns, "backups", "shop")
	g.Expect(r.stderr).To(ContainSubstring("forbidden"), "listing the store asks the operator: it needs patch on the BackupJob")
	g.Expect(ok(t, "olga", ns, "backups", "shop", "--cached")).To(HavePrefix("NAME"), "the last listing is readable with view")
}
