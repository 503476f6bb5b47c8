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
