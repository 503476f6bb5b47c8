package view_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/kubectl-cairn/internal/view"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// now is the fixed clock of the golden files.
var now = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }

func cond(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
}

// objects is one of each state status must tell apart.
func objects() view.Objects {
	healthy := backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-db"},
		Spec: backupv1.BackupJobSpec{Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai"},
		Status: backupv1.BackupJobStatus{Phase: backupv1.PhaseSucceeded, LastResult: backupv1.RunSucceeded,
			LastSuccessfulTime: at(-5 * time.Hour), NextScheduleTime: at(15 * time.Hour),
			LastArtifact: &cairnv1.Artifact{Path: "cairn/shop/orders-db/shop_orders_20261204T220000.000Z.pgdump.zst", Size: 1 << 20, Checksum: "sha256:ab"},
			Server:       &cairnv1.ServerInfo{Engine: "postgres", Version: "15.20"}}}
	unsupported := backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders18-db"},
		Spec: backupv1.BackupJobSpec{Schedule: "0 4 * * *", TimeZone: "UTC"},
		Status: backupv1.BackupJobStatus{Phase: backupv1.PhaseFailed, LastResult: backupv1.RunFailed, ConsecutiveFailures: 1,
			Conditions: []metav1.Condition{cond(cairnv1.StalledCondition, metav1.ConditionTrue, cairnv1.UnsupportedServerVersionReason,
				"backup run orders18-db-1: backup failed: unsupported server version: PostgreSQL 18.6 cannot be served by this agent image's tools (it supports PostgreSQL 15 and older)")}}}
	failing := backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "carts-db"},
		Spec: backupv1.BackupJobSpec{Schedule: "*/30 * * * *", TimeZone: "UTC"},
		Status: backupv1.BackupJobStatus{Phase: backupv1.PhaseFailed, LastResult: backupv1.RunFailed, ConsecutiveFailures: 3,
			LastRunMessage: "agent failed: backup failed: connection refused", LastSuccessfulTime: at(-26 * time.Hour), NextScheduleTime: at(10 * time.Minute)}}
	fresh := backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "ledger"},
		Spec:   backupv1.BackupJobSpec{Schedule: "@daily", TimeZone: "Europe/Berlin"},
		Status: backupv1.BackupJobStatus{Phase: backupv1.PhaseScheduled, NextScheduleTime: at(2 * time.Hour)}}
	planBJ := backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Labels: map[string]string{platformv1.PlanLabel: "orders"}},
		Status: backupv1.BackupJobStatus{Phase: backupv1.PhaseSucceeded, LastResult: backupv1.RunSucceeded, LastSuccessfulTime: at(-30 * time.Minute), NextScheduleTime: at(30 * time.Minute),
			Server: &cairnv1.ServerInfo{Engine: "postgres", Version: "17.12"}}}
	rto := metav1.Duration{Duration: time.Hour}
	protected := platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec: platformv1.ProtectionPlanSpec{TimeZone: "Asia/Shanghai", Backup: platformv1.BackupTemplate{Schedule: "0 * * * *"},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 2 * time.Hour}, RTO: &rto}},
		Status: platformv1.ProtectionPlanStatus{Phase: platformv1.PhaseProtected,
			LastBackup:      &platformv1.BackupRecord{BackupJob: "orders", SuccessfulTime: at(-30 * time.Minute), Artifact: &cairnv1.Artifact{Path: "cairn/shop/orders/a.pgdump.zst"}},
			RecoveryPoint:   at(-90 * time.Minute),
			RestoreDuration: &metav1.Duration{Duration: 4 * time.Second},
			Conditions: []metav1.Condition{
				cond(platformv1.RecoverabilityVerifiedCondition, metav1.ConditionTrue, platformv1.VerificationSucceededReason, "verified"),
				cond(platformv1.ObjectivesMetCondition, metav1.ConditionTrue, platformv1.ObjectivesMetReason, "met"),
			}}}
	atRisk := platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "invoices"},
		Spec: platformv1.ProtectionPlanSpec{TimeZone: "UTC", Backup: platformv1.BackupTemplate{Schedule: "0 3 * * *"},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}}},
		Status: platformv1.ProtectionPlanStatus{Phase: platformv1.PhaseAtRisk,
			LastBackup: &platformv1.BackupRecord{BackupJob: "invoices", SuccessfulTime: at(-30 * time.Hour)},
			Conditions: []metav1.Condition{
				cond(platformv1.RecoverabilityVerifiedCondition, metav1.ConditionFalse, platformv1.VerificationFailedReason, "RestoreJob invoices-verify-4 failed: check has-rows failed"),
				cond(platformv1.ObjectivesMetCondition, metav1.ConditionFalse, platformv1.ObjectivesViolatedReason, "rpo 26h0m0s: the newest backup is 30h0m0s old"),
			}}}
	waiting := migrationv1.MigrationJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-to-v16"},
		Spec:   migrationv1.MigrationJobSpec{Cutover: migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual}},
		Status: migrationv1.MigrationJobStatus{Phase: migrationv1.PhaseReadyForCutover}}
	done := migrationv1.MigrationJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "carts-to-v16"},
		Spec:   migrationv1.MigrationJobSpec{Cutover: migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto}},
		Status: migrationv1.MigrationJobStatus{Phase: migrationv1.PhaseSucceeded, CompletionTime: at(-48 * time.Hour)}}
	return view.Objects{
		BackupJobs:    []backupv1.BackupJob{healthy, failing, fresh, planBJ, unsupported},
		Plans:         []platformv1.ProtectionPlan{protected, atRisk},
		MigrationJobs: []migrationv1.MigrationJob{waiting, done},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/view -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./internal/view -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestStatusGolden(t *testing.T) {
	rows := view.Status(objects(), now)
	for _, c := range []struct {
		file      string
		all, wide bool
	}{{"status-all.txt", true, false}, {"status-all-wide.txt", true, true}} {
		var b bytes.Buffer
		if err := view.Table(&b, rows, now, c.all, c.wide); err != nil {
			t.Fatal(err)
		}
		golden(t, c.file, b.Bytes())
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-all.json", append(js, '\n'))
}

// Attention orders the rows: failures first, then what waits for a human,
// then what is not yet protected, then the healthy ones; a plan's own
// BackupJob is folded into the plan's row.
func TestStatusOrdersByAttention(t *testing.T) {
	var got []string
	for _, r := range view.Status(objects(), now) {
		got = append(got, r.Level+" "+r.Kind+" "+r.Namespace+"/"+r.Name)
	}
	want := []string{
		"critical ProtectionPlan billing/invoices",
		"critical BackupJob shop/carts-db",
		"critical BackupJob shop/orders18-db",
		"action MigrationJob shop/orders-to-v16",
		"warning BackupJob billing/ledger",
		"ok BackupJob shop/orders-db",
		"ok MigrationJob shop/carts-to-v16",
		"ok ProtectionPlan shop/orders",
	}
	if len(got) != len(want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d: %q, want %q (all: %q)", i, got[i], want[i], got)
		}
	}
}
