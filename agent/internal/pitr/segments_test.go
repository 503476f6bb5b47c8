package pitr

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/store"
)

// archive writes records for segments (no objects: the index reads records).
func archive(t *testing.T, segs ...Segment) *Index {
	t.Helper()
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		b, _ := json.Marshal(s)
		if _, err := st.Put(context.Background(), recordKey("a", s.File), strings.NewReader(string(b))); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := LoadIndex(context.Background(), st, "a")
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func at(sec int) time.Time { return time.Date(2026, 12, 5, 10, 0, sec, 0, time.UTC) }

func TestChainWindowGapsAndPrunable(t *testing.T) {
	ix := archive(t,
		Segment{File: "b.000001", First: at(0), Last: at(9), Next: "b.000002"},
		Segment{File: "b.000002", First: at(10), Last: at(19), Stopped: true}, // the server restarted
		Segment{File: "b.000003", First: at(20), Last: at(29), ClosedBy: at(31), Next: "b.000004"},
		// b.000004 is missing: a gap.
		Segment{File: "b.000005", First: at(40), Last: at(49), Next: "b.000006"},
	)
	if g := ix.Gaps(); len(g) != 1 || g[0] != (Gap{After: "b.000003", Missing: "b.000004"}) {
		t.Errorf("gaps: %v", g)
	}
	chain, err := ix.Chain("b.000001", at(15))
	if err != nil || len(chain) != 2 {
		t.Errorf("chain to 10:00:15: %v, %v", chain, err)
	}
	chain, err = ix.Chain("b.000002", at(30)) // covered by b.000003's flush
	if err != nil || len(chain) != 2 || chain[1].File != "b.000003" {
		t.Errorf("chain to 10:00:30: %v, %v", chain, err)
	}
	if _, err = ix.Chain("b.000001", at(45)); err == nil || !strings.Contains(err.Error(), "b.000004") {
		t.Errorf("chain across the gap: %v", err)
	}
	if _, err = ix.Chain("b.000001", time.Time{}); err == nil || !strings.Contains(err.Error(), "b.000004") {
		t.Errorf("chain to latest across the gap: %v", err)
	}
	if _, err = ix.Chain("b.000005", at(55)); !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("chain past the newest change: %v", err)
	}
	// A newest segment with no commit in it: no zero time in the message.
	empty := archive(t, Segment{File: "b.000001"})
	if _, err = empty.Chain("b.000001", at(5)); !errors.Is(err, ErrOutsideWindow) || strings.Contains(err.Error(), "0001-01-01") ||
		!strings.Contains(err.Error(), "none with a commit time yet") {
		t.Errorf("chain past a segment with no commit: %v", err)
	}
	if _, err = ix.Chain("b.000000", time.Time{}); !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("chain from an unarchived base: %v", err)
	}
	if w := ix.WindowFrom(Base{File: "b.000001", Pos: 4}); !w.Latest.Equal(at(31)) || w.Gap == nil || w.Gap.Missing != "b.000004" {
		t.Errorf("window from b.000001: %+v", w)
	}
	if w := ix.WindowFrom(Base{File: "b.000005", Pos: 4}); !w.Latest.Equal(at(49)) || w.Gap != nil {
		t.Errorf("window from b.000005: %+v", w)
	}
	if p := ix.Prunable(nil); p != nil {
		t.Errorf("prunable with no base kept: %v", p)
	}
	if p := ix.Prunable([]Base{{File: "b.000005"}, {File: "b.000003"}}); strings.Join(p, ",") != "b.000001,b.000002" {
		t.Errorf("prunable before b.000003: %v", p)
	}
	if n := nextFile("mysql-bin.000999"); n != "mysql-bin.001000" {
		t.Errorf("next of 999: %s", n)
	}
}

// A proof of quiet: nothing was written after the newest segment until
// Covered.At. The window moves to it; a base in the file the server opened
// after that segment (a dump of an idle server) replays nothing up to it,
// and a time after it is refused; a proof for an older segment, or a base
// in any other unarchived file, proves nothing.
func TestProofOfQuiet(t *testing.T) {
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range []Segment{
		{File: "b.000001", First: at(0), Last: at(9), Next: "b.000002"},
		{File: "b.000002", First: at(10), Last: at(19), ClosedBy: at(20), Next: "b.000003"},
	} {
		b, _ := json.Marshal(s)
		if _, err := st.Put(ctx, recordKey("a", s.File), strings.NewReader(string(b))); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *Index {
		ix, err := LoadIndex(ctx, st, "a")
		if err != nil {
			t.Fatal(err)
		}
		return ix
	}
	if w := load().WindowFrom(Base{File: "b.000003", Pos: 256}); !w.Latest.IsZero() {
		t.Errorf("window from an unarchived file with no proof: %+v", w)
	}
	if err := putCovered(ctx, st, "a", Covered{Through: "b.000002", At: at(50)}); err != nil {
		t.Fatal(err)
	}
	ix := load()
	if w := ix.WindowFrom(Base{File: "b.000001"}); !w.Latest.Equal(at(50)) {
		t.Errorf("window from b.000001 with the proof: %+v, want to 10:00:50", w)
	}
	if w := ix.WindowFrom(Base{File: "b.000003", Pos: 256}); !w.Latest.Equal(at(50)) || w.Through != "b.000002" {
		t.Errorf("window from the quiet file: %+v, want to 10:00:50", w)
	}
	if chain, err := ix.Chain("b.000003", at(40)); err != nil || len(chain) != 0 {
		t.Errorf("chain from the quiet file to 10:00:40: %v, %v (want none to replay)", chain, err)
	}
	if chain, err := ix.Chain("b.000001", at(40)); err != nil || len(chain) != 2 {
		t.Errorf("chain from b.000001 to 10:00:40: %v, %v", chain, err)
	}
	if _, err := ix.Chain("b.000003", at(51)); !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("chain from the quiet file past the proof: %v", err)
	}
	if _, err := ix.Chain("b.000004", time.Time{}); !errors.Is(err, ErrOutsideWindow) {
		t.Errorf("chain from a file after the quiet one: %v", err)
	}
	// A proof for an older segment says nothing of the newest.
	if err := putCovered(ctx, st, "a", Covered{Through: "b.000001", At: at(50)}); err != nil {
		t.Fatal(err)
	}
	ix = load()
	if w := ix.WindowFrom(Base{File: "b.000003"}); !w.Latest.IsZero() {
		t.Errorf("window from the quiet file with a stale proof: %+v", w)
	}
	if w := ix.WindowFrom(Base{File: "b.000001"}); !w.Latest.Equal(at(20)) {
		t.Errorf("window from b.000001 with a stale proof: %+v, want to 10:00:20", w)
	}
}
