package cmd

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

func testOptions() *Options {
	return &Options{Now: func() time.Time { return time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC) }}
}

func ordersDB() *backupv1.BackupJob {
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = "shop", "orders-db"
	bj.Spec.TimeZone = "Asia/Shanghai"
	bj.Spec.Database = cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"}}
	return bj
}

func TestRestoreJobDefaultsToTheSourceServer(t *testing.T) {
	rj, err := testOptions().restoreJob(ordersDB(), restoreFlags{into: "orders_restored"})
	if err != nil {
		t.Fatal(err)
	}
	tgt := rj.Spec.Target
	if tgt.Host != "orders-db.shop.svc" || tgt.Database != "orders_restored" || tgt.CredentialsSecretRef.Name != "orders-db-credentials" {
		t.Fatalf("target %+v", tgt)
	}
	if rj.Name != "orders-db-1796439600" || rj.Spec.Source.BackupJob.Name != "orders-db" || rj.Spec.Source.BackupJob.Artifact != "" {
		t.Fatalf("RestoreJob %s source %+v", rj.Name, rj.Spec.Source.BackupJob)
	}
	if len(rj.Spec.Checks) != 1 || !rj.Spec.Checks[0].RowCountsMatchBackup {
		t.Fatalf("checks %+v: want the row-counts check", rj.Spec.Checks)
	}
	if rj, _ := testOptions().restoreJob(ordersDB(), restoreFlags{into: "x", noCheck: true}); len(rj.Spec.Checks) != 0 {
		t.Fatalf("--no-check: checks %+v", rj.Spec.Checks)
	}
}

// The overwrite guard and the target's checks are admission's
// (libs/validation): every spelling of the source's address is refused.
func TestRestoreJobRefusesWhatAdmissionRefuses(t *testing.T) {
	for _, c := range []struct {
		f    restoreFlags
		want string
	}{
		{restoreFlags{into: "orders"}, "is the database backupjob/orders-db backs up"},
		{restoreFlags{into: "orders", host: "orders-db"}, "is the database backupjob/orders-db backs up"},
		{restoreFlags{into: "orders", host: "orders-db.shop.svc.cluster.local"}, "is the database backupjob/orders-db backs up"},
		{restoreFlags{into: "orders", port: 5432}, "is the database backupjob/orders-db backs up"},
		{restoreFlags{into: "-bad name"}, "spec.target.database"},
		{restoreFlags{into: "x", host: "http://evil"}, "spec.target.host"},
		{restoreFlags{into: "x", name: "Not_A_Name"}, "metadata.name"},
	} {
		_, err := testOptions().restoreJob(ordersDB(), c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.f, err, c.want)
		}
	}
	if _, err := testOptions().restoreJob(ordersDB(), restoreFlags{into: "orders", allowOverwrite: true}); err != nil {
		t.Errorf("--allow-overwrite-source: %v", err)
	}
	if _, err := testOptions().restoreJob(ordersDB(), restoreFlags{into: "orders", port: 5433}); err != nil {
		t.Errorf("another port is another server: %v", err)
	}
}

func TestParseTimeInTheBackupJobsZone(t *testing.T) {
	got, err := parseTime("2026-12-05 10:30", "Asia/Shanghai")
	if err != nil || !got.Equal(time.Date(2026, 12, 5, 2, 30, 0, 0, time.UTC)) {
		t.Fatalf("parseTime: %v %v", got, err)
	}
	if got, err := parseTime("2026-12-05T02:30:00Z", "Asia/Shanghai"); err != nil || got.Hour() != 2 {
		t.Fatalf("RFC 3339: %v %v", got, err)
	}
	if _, err := parseTime("yesterday", "UTC"); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Fatalf("bad time: %v", err)
	}
}

// Flags are parsed as cobra and kubectl parse them: --artifact, --latest
// and --at exclude each other, --into is required, -o takes kubectl's
// spellings; no cluster is contacted for these.
func TestFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "orders-db", "--into", "x", "--latest", "--artifact", "a"}, "none of the others can be"},
		{[]string{"restore", "orders-db"}, `required flag(s) "into" not set`},
		{[]string{"status", "-o", "xml"}, `--output "xml"`},
		{[]string{"backups", "-o", "csv", "orders-db"}, `--output "csv"`},
		{[]string{"backup"}, "accepts 1 arg(s)"},
		{[]string{"approve", "a", "b"}, "accepts 1 arg(s)"},
	} {
		var out, errOut bytes.Buffer
		root := NewRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, "test")
		root.SetArgs(c.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	root := NewRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v1.2.3")
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "v1.2.3") {
		t.Fatalf("--version: %v %q", err, out.String())
	}
}
