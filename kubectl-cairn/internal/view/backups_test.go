package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
)

// Each artifact of the listing shows whom it is encrypted to, until when
// it is locked and what the last prune decided (kept and why, or pruned;
// "would prune" in a dry run), from status.retention; "-" where the
// status says nothing. Times are in the BackupJob's zone.
func TestBackupsShowEncryptionLockAndRetention(t *testing.T) {
	at := func(s string) *metav1.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: v}
	}
	const dir = "cairn/shop/orders-db/"
	cat := &backupv1.CatalogListing{Count: 3, Artifacts: []backupv1.CatalogArtifact{
		{Path: dir + "new.pgdump.zst.age", Size: 2048, Checksum: "sha256:" + strings.Repeat("a", 64), Time: at("2026-12-04T18:00:00Z"),
			EncryptedTo: []string{"age-fp:1111111111111111", "age-fp:2222222222222222"}},
		{Path: dir + "nov.pgdump.zst", Size: 1024, Checksum: "sha256:" + strings.Repeat("b", 64), Time: at("2026-11-29T18:00:00Z")},
		{Path: dir + "old.pgdump.zst", Size: 10, Checksum: "sha256:" + strings.Repeat("c", 64), Time: at("2026-11-01T18:00:00Z")},
	}}
	ret := &backupv1.RetentionStatus{DryRun: true, Kept: []backupv1.KeptArtifact{
		{Artifact: "new.pgdump.zst.age", Reasons: []string{"newest", "daily", "monthly"}, LockedUntil: at("2026-12-12T18:00:00Z")},
		{Artifact: "nov.pgdump.zst", Reasons: []string{"monthly"}, LockedUntil: at("2027-10-31T16:00:00Z")},
	}, Pruned: []string{"old.pgdump.zst"}}
	rows := Backups(cat, "Asia/Shanghai", map[string]string{dir + "nov.pgdump.zst": "orders-verify-3"}, ret)
	if rows[1].Retention != RetentionKept || rows[1].LockedUntil != "2027-11-01 00:00:00 CST" || rows[2].Retention != RetentionWouldPrune {
		t.Fatalf("rows %+v", rows)
	}
	var b bytes.Buffer
	if err := BackupsTable(&b, rows, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for i, want := range [][]string{
		{"NAME", "ENCRYPTED TO", "LOCKED UNTIL", "RETENTION", "VERIFIED"},
		{"new.pgdump.zst.age", "age-fp:1111111111111111,age-fp:2222222222222222", "2026-12-13 02:00:00 CST", "kept: newest,daily,monthly", "no"},
		{"nov.pgdump.zst", "2027-11-01 00:00:00 CST", "kept: monthly", "yes (orders-verify-3)"},
		{"old.pgdump.zst", "would prune"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	// Not a dry run: pruned. No status: dashes.
	ret.DryRun = false
	if r := Backups(cat, "Asia/Shanghai", nil, ret); r[2].Retention != RetentionPruned {
		t.Fatalf("pruned row %+v", r[2])
	}
	b.Reset()
	if err := BackupsTable(&b, Backups(cat, "Asia/Shanghai", nil, nil), false); err != nil {
		t.Fatal(err)
	}
	if l := strings.Split(b.String(), "\n")[2]; !strings.Contains(l, "-  ") || strings.Contains(l, "kept") {
		t.Fatalf("without status.retention: %q", l)
	}
}
