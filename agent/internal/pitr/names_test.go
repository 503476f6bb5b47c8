package pitr

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/store"
)

// Issue 47, item 5: a segment record whose file name leaves the archive
// ("../…", written by whoever can write the store) is refused when the
// archive is read: a replay never writes its segment outside its private
// folder (nor would prune delete keys outside the archive).
func TestSegmentRecordNamingAnotherFileIsRefused(t *testing.T) {
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	rel, err := filepath.Rel(os.TempDir(), outside)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("%s is not under %s", outside, os.TempDir())
	}
	escaping := "../" + rel + "/evil"
	seg := stored(t, st, "mysql-bin.000001", nil)
	// The record under its usual key names the escaping file; the object
	// is where that name leads.
	seg.File, seg.Next = escaping, ""
	rec, _ := json.Marshal(seg)
	write(t, st, recordKey("arch", "mysql-bin.000001"), rec)
	write(t, st, path.Join("arch", escaping+".zst"), read(t, st, path.Join("arch", "mysql-bin.000001.zst")))

	_, err = Prepare(context.Background(), st, "arch", Base{File: escaping, Pos: 4}, time.Time{}, "shop", "shop_copy", "", nil)
	if !errors.Is(err, ErrBadRecord) {
		t.Errorf("a replay from a record naming %q: %v, want ErrBadRecord", escaping, err)
	}
	if _, serr := os.Stat(filepath.Join(outside, "evil")); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("the segment was written outside the replay's folder (%v)", serr)
	}
	if _, err := LoadIndex(context.Background(), st, "arch"); !errors.Is(err, ErrBadRecord) {
		t.Errorf("reading an archive with a record naming %q: %v, want ErrBadRecord", escaping, err)
	}
}

// Issue 47, item 5: wal-fetch's destination is checked resolved, not by
// name: pg_wal a link to a folder outside the data directory (the server,
// or a base, could make one) gets nothing written through it; a real
// pg_wal gets the segment.
func TestWALFetchDoesNotWriteThroughALink(t *testing.T) {
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seg := stored(t, st, "000000010000000000000002", nil)
	for _, linked := range []bool{true, false} {
		tmp := t.TempDir()
		outside := t.TempDir()
		dataDir := filepath.Join(tmp, "data")
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		walDir := filepath.Join(dataDir, "pg_wal")
		if linked {
			err = os.Symlink(outside, walDir)
		} else {
			err = os.Mkdir(walDir, 0o700)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := &Recovery{st: st, dir: "arch", chain: []Segment{seg}, DataDir: dataDir, Tmp: tmp, log: slog.New(slog.DiscardHandler)}
		sock := filepath.Join(tmp, "s")
		if r.ln, err = net.Listen("unix", sock); err != nil {
			t.Fatal(err)
		}
		r.wg.Add(1)
		go r.serve(context.Background())
		var stderr strings.Builder
		code := WALFetch([]string{sock, seg.File, filepath.Join(walDir, "RECOVERYXLOG")}, &stderr)
		r.ln.Close()
		r.wg.Wait()
		landed, _ := os.ReadDir(outside)
		switch {
		case linked && (code == 0 || len(landed) > 0):
			t.Errorf("wal-fetch through pg_wal -> %s: exit %d, %d file(s) written there", outside, code, len(landed))
		case !linked && code != 0:
			t.Errorf("wal-fetch into a real pg_wal: exit %d: %s", code, stderr.String())
		case !linked:
			if b, err := os.ReadFile(filepath.Join(walDir, "RECOVERYXLOG")); err != nil || !strings.Contains(string(b), marker) {
				t.Errorf("wal-fetch into a real pg_wal wrote %d bytes (%v)", len(b), err)
			}
		}
	}
}
