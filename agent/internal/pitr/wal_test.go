package pitr

import (
	"strings"
	"testing"
	"time"
)

func TestWALNames(t *testing.T) {
	const seg = 16 << 20
	lsn, err := ParseLSN("1/FF000028")
	if err != nil {
		t.Fatal(err)
	}
	if got := WALName(3, lsn, seg); got != "0000000300000001000000FF" {
		t.Errorf("WALName = %s", got)
	}
	// The segment after the last of a log file is the next log file's first.
	if got := NextWAL("0000000300000001000000FF", seg); got != "000000030000000200000000" {
		t.Errorf("NextWAL = %s", got)
	}
	if got := lsn.String(); got != "1/FF000028" {
		t.Errorf("LSN.String = %s", got)
	}
	if _, err := ParseLSN("1-FF"); err == nil {
		t.Error("ParseLSN accepted 1-FF")
	}
}

func TestSlotName(t *testing.T) {
	a, b := SlotName("shop/orders-db"), SlotName("shop/orders_db")
	if a == b {
		t.Errorf("two jobs share slot %s", a)
	}
	if a != SlotName("shop/orders-db") || !strings.HasPrefix(a, "cairn_pitr_shop_orders_db_") {
		t.Errorf("slot name %s: not deterministic or not readable", a)
	}
	long := SlotName("a-very-long-namespace-name-for-testing/" + strings.Repeat("x", 200))
	if len(long) > 63 || strings.Trim(long, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Errorf("slot name %q: over 63 characters or not [a-z0-9_]", long)
	}
}

func TestParseBackupLabel(t *testing.T) {
	l, err := ParseBackupLabel([]byte(`START WAL LOCATION: 0/3000028 (file 000000010000000000000003)
CHECKPOINT LOCATION: 0/3000060
BACKUP METHOD: streamed
BACKUP FROM: primary
START TIME: 2026-12-05 15:50:53 UTC
LABEL: cairn
START TIMELINE: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	if l.File != "000000010000000000000003" || l.StartLSN.String() != "0/3000028" || l.Timeline != 1 ||
		!l.StartTime.Equal(time.Date(2026, 12, 5, 15, 50, 53, 0, time.UTC)) {
		t.Errorf("label %+v", l)
	}
	if _, err := ParseBackupLabel([]byte("LABEL: x\n")); err == nil {
		t.Error("a label without its WAL start parsed")
	}
}

// A WAL archive whose server changed timeline: the break is a gap named
// as a timeline change, and no chain crosses it.
func TestTimelineChangeIsAGap(t *testing.T) {
	const seg = 16 << 20
	ix := &Index{Dir: "_wal/ns/j", Segments: map[string]Segment{}}
	add := func(f string, last time.Time) {
		ix.Segments[f] = Segment{File: f, Next: NextWAL(f, seg), Last: last}
	}
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	add("000000010000000000000004", t0)
	add("000000010000000000000005", t0.Add(time.Minute))
	add("000000020000000000000006", t0.Add(2*time.Minute))
	gaps := ix.Gaps()
	if len(gaps) != 1 || gaps[0].Missing != "000000010000000000000006" || gaps[0].Timeline != "000000020000000000000006" ||
		!strings.Contains(gaps[0].String(), "timeline") {
		t.Fatalf("gaps %+v", gaps)
	}
	if _, err := ix.Chain("000000010000000000000004", time.Time{}); err == nil || !strings.Contains(err.Error(), "timeline") {
		t.Errorf("a chain across the timeline change: %v", err)
	}
	if _, err := ix.Chain("000000010000000000000004", t0.Add(30*time.Second)); err != nil {
		t.Errorf("a chain before the change: %v", err)
	}
}

// The archiver's proof of quiet moves the window past the newest segment's
// last change, and only from the newest segment.
func TestCoveredMovesTheWindow(t *testing.T) {
	const seg = 16 << 20
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ix := &Index{Dir: "d", Segments: map[string]Segment{
		"000000010000000000000004": {File: "000000010000000000000004", Next: NextWAL("000000010000000000000004", seg), Last: t0},
	}}
	later := t0.Add(5 * time.Minute)
	if _, err := ix.Chain("000000010000000000000004", later); err == nil {
		t.Fatal("a time after the newest change was accepted without a proof of quiet")
	}
	ix.Covered = &Covered{Through: "000000010000000000000004", At: later}
	if _, err := ix.Chain("000000010000000000000004", later); err != nil {
		t.Errorf("with the archive quiet until %s: %v", later, err)
	}
	if w := ix.WindowFrom(Base{File: "000000010000000000000004"}); !w.Latest.Equal(later) {
		t.Errorf("window latest %s, want %s", w.Latest, later)
	}
	ix.Covered.Through = "000000010000000000000003" // an older proof says nothing of the newest segment
	if _, err := ix.Chain("000000010000000000000004", later); err == nil {
		t.Error("a proof of quiet through an older segment was taken for the newest")
	}
}
