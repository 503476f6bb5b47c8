package pitr

// The WAL archiver: pg_receivewal into a spool, complete segments stored.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/store"
)

// WALArchiver streams a PostgreSQL server's write-ahead log into Store
// under Dir, one segment per WAL file, closing the segment being written at
// least every MaxSegmentAge (pg_switch_wal, when it holds changes).
//
// pg_receivewal receives the WAL over the replication protocol without a
// slot of its own; the archiver's physical slot (Slot) is advanced only
// past segments that are stored, so the server keeps every segment the
// archive does not hold yet, and a restarted archiver (its spool lost)
// resumes right after the newest stored segment.
type WALArchiver struct {
	Conn  engine.Conn
	Store store.Store
	Dir   string
	// Spool is a local folder for the segments being received.
	Spool         string
	MaxSegmentAge time.Duration
	Slot          string
	// Recipients, when set, encrypt every segment (age), as a dump is.
	Recipients *crypt.Recipients
	// MaxRetainedWALBytes, when positive: the archiver drops its own slot
	// when the slot retains more WAL than that (it fell behind: the store
	// is unreachable); the archive then shows a gap, the source is safe.
	MaxRetainedWALBytes int64
	Log                 *slog.Logger
	// Archived, when set, is called after each segment is stored.
	Archived func(Segment)
	// Started, when set, is called with the segment reading starts at.
	Started func(file string)
	// CaughtUp, when set, is called with a time everything committed
	// before it is archived (a proof of quiet stored, or the segment a
	// switch closed stored): the archiver's readiness (Archiver.CaughtUp).
	CaughtUp func(time.Time)

	segSize int64
	newest  string // the newest stored segment
	// floor is the spool's placeholder when reading started: it and what
	// is before it are never shipped.
	floor    string
	switched map[string]time.Time
	// lastClosed is the segment the archiver's last switch closed.
	lastClosed string
}

// Run archives until ctx ends.
func (a *WALArchiver) Run(ctx context.Context) error {
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Slot == "" {
		return errors.New("no replication slot name")
	}
	db, err := inventory.ConnectPostgres(ctx, a.Conn, "postgres")
	if err != nil {
		return err
	}
	defer db.Close(context.WithoutCancel(ctx))
	if err := a.checkSource(ctx, db); err != nil {
		return err
	}
	if err := os.MkdirAll(a.Spool, 0o700); err != nil {
		return err
	}
	a.switched = map[string]time.Time{}
	ix, err := LoadIndex(ctx, a.Store, a.Dir)
	if err != nil {
		return err
	}
	if n, ok := ix.Newest(); ok {
		a.newest = n.File
	}
	tick := min(a.MaxSegmentAge/4, 2*time.Second)
	if tick <= 0 {
		tick = time.Second
	}
	backoff := time.Second
	for {
		start, err := a.prepare(ctx, db)
		if err != nil {
			return err
		}
		a.Log.Info("reading the write-ahead log", "from", start, "slot", a.Slot)
		if a.Started != nil {
			a.Started(start)
		}
		readerCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- a.read(readerCtx) }()
		err = a.loop(ctx, db, done, tick)
		stop()
		if ctx.Err() != nil {
			return nil
		}
		// pg_receivewal stopped (the server restarted, the connection
		// broke), or the store does not take segments: store what it
		// received — with a full spool, until the store takes it all —
		// then start it again.
		full := errors.Is(err, errSpoolFull)
		if full {
			a.Log.Warn("the spool is full and the store takes no segment: reading stops until it does (the slot keeps the WAL on the source, up to its limit)", "err", err)
		}
		for {
			serr := a.ship(ctx, db)
			if serr == nil && (!full || a.unshipped() == 0) {
				break
			}
			if serr != nil {
				a.Log.Warn("storing closed segments", "err", serr)
			}
			if !full {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			if werr := a.watch(ctx, db); werr != nil {
				a.Log.Warn("checking the replication slot", "err", werr)
			}
		}
		a.Log.Warn("the WAL reader stopped; starting it again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
		if db.IsClosed() || db.Ping(ctx) != nil {
			db.Close(context.WithoutCancel(ctx))
			if db, err = inventory.ConnectPostgres(ctx, a.Conn, "postgres"); err != nil {
				return err
			}
		}
	}
}

// checkSource refuses a server whose WAL cannot serve recovery, and reports
// how the server bounds a slot.
func (a *WALArchiver) checkSource(ctx context.Context, db *pgx.Conn) error {
	var level, keep, segSize string
	var standby bool
	err := db.QueryRow(ctx, `SELECT current_setting('wal_level'), current_setting('max_slot_wal_keep_size'),
  current_setting('wal_segment_size'), pg_is_in_recovery()`).Scan(&level, &keep, &segSize, &standby)
	if err != nil {
		return fmt.Errorf("reading the source's WAL settings: %w", err)
	}
	if level != "replica" && level != "logical" {
		return fmt.Errorf("the source's wal_level is %s: point-in-time recovery needs replica (or logical)", level)
	}
	if standby {
		return errors.New("the source is a standby (in recovery): archive the primary's WAL (pg_switch_wal cannot run on a standby)")
	}
	var n int64
	if err := db.QueryRow(ctx, "SELECT setting::bigint * CASE unit WHEN 'B' THEN 1 WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576 ELSE 1 END FROM pg_settings WHERE name = 'wal_segment_size'").Scan(&n); err != nil || n <= 0 {
		return fmt.Errorf("reading wal_segment_size (%s): %v", segSize, err)
	}
	a.segSize = n
	if keep == "-1" {
		a.Log.Warn("the source's max_slot_wal_keep_size is -1 (unbounded): only the archiver's and the operator's watchdog bound the WAL its slot retains; set it on the server to bound it there too",
			"slot", a.Slot, "maxRetainedWALBytes", a.MaxRetainedWALBytes)
	} else {
		a.Log.Info("the source bounds the WAL a slot retains", "max_slot_wal_keep_size", keep)
	}
	return nil
}

// prepare makes sure the slot exists and holds the WAL after the newest
// stored segment, and puts a placeholder of that segment in the spool so
// pg_receivewal starts right after it. It returns the first segment to be
// read. A slot that was dropped (by the watchdog) or lost (the server's
// max_slot_wal_keep_size) is created again, from now: the archive then
// shows the gap.
func (a *WALArchiver) prepare(ctx context.Context, db *pgx.Conn) (string, error) {
	s, err := readSlot(ctx, db, a.Slot)
	if err != nil {
		return "", err
	}
	if s.exists && s.lost {
		a.Log.Warn("the archiver's replication slot lost its WAL (the server's max_slot_wal_keep_size): dropping and creating it again; the archive has a gap", "slot", a.Slot)
		if _, err := db.Exec(ctx, "SELECT pg_drop_replication_slot($1)", a.Slot); err != nil {
			return "", fmt.Errorf("dropping the lost replication slot %s: %w", a.Slot, err)
		}
		s.exists = false
	}
	if !s.exists {
		if _, err := db.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", a.Slot); err != nil {
			return "", fmt.Errorf("creating the physical replication slot %s: %w", a.Slot, err)
		}
		a.Log.Info("created the archiver's physical replication slot", "slot", a.Slot)
		if s, err = readSlot(ctx, db, a.Slot); err != nil {
			return "", err
		}
	}
	var tli int
	if err := db.QueryRow(ctx, "SELECT timeline_id FROM pg_control_checkpoint()").Scan(&tli); err != nil {
		return "", fmt.Errorf("reading the source's timeline: %w", err)
	}
	// Where the server still has WAL for: from the slot's restart point.
	first := WALName(tli, s.restart, a.segSize)
	start := first
	if a.newest != "" {
		next := NextWAL(a.newest, a.segSize)
		_, nextNo, _ := parseWAL(next, a.segSize)
		_, firstNo, _ := parseWAL(first, a.segSize)
		ntli, _, _ := parseWAL(a.newest, a.segSize)
		switch {
		case ntli == tli && nextNo >= firstNo:
			start = next
		default:
			a.Log.Warn("the server no longer keeps the segment after the newest archived one: the archive has a gap",
				"newest", a.newest, "missing", next, "resumingAt", first)
		}
	}
	// The spool holds only the placeholder of the segment before start
	// (pg_receivewal continues after the newest complete segment it finds)
	// and nothing pg_receivewal left: what it had received and not stored
	// is received again.
	entries, err := os.ReadDir(a.Spool)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(a.Spool, e.Name())); err != nil {
			return "", err
		}
	}
	stli, startNo, _ := parseWAL(start, a.segSize)
	a.floor = ""
	if startNo > 0 {
		a.floor = walFile(stli, startNo-1, a.segSize)
		if err := placeholder(filepath.Join(a.Spool, a.floor), a.segSize); err != nil {
			return "", err
		}
	}
	return start, nil
}

// MaxSpoolSegments bounds the received segments the spool holds while the
// store takes none (512 MiB of 16 MB segments): then reading stops until
// the store takes them; the slot keeps the WAL on the source meanwhile
// (bounded by MaxRetainedWALBytes and the watchdog).
const MaxSpoolSegments = 32

var errSpoolFull = errors.New("the spool is full of segments the store did not take")

// unshipped counts the complete segments in the spool after the newest
// stored one.
func (a *WALArchiver) unshipped() int {
	entries, err := os.ReadDir(a.Spool)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if name := e.Name(); len(name) == walNameLen && name > a.newest && name > a.floor {
			n++
		}
	}
	return n
}

// placeholder writes a sparse file of a segment's size: pg_receivewal
// takes it for a complete segment and streams from the next.
func placeholder(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// read runs pg_receivewal until ctx ends or it stops.
func (a *WALArchiver) read(ctx context.Context) error {
	bin, err := PGTool("pg_receivewal")
	if err != nil {
		return err
	}
	conninfo := "host=" + engine.QuoteConninfo(a.Conn.Host) + " port=" + engine.QuoteConninfo(strconv.Itoa(a.Conn.Port)) +
		" user=" + engine.QuoteConninfo(a.Conn.User) + " application_name=" + engine.QuoteConninfo(a.Slot) + engine.ToolsNoCleartext()
	cmd := exec.CommandContext(ctx, bin, "--directory="+a.Spool, "--dbname="+conninfo, "--no-password",
		"--no-loop", "--no-sync", "--status-interval=5", "--verbose")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PGPASSWORD=" + a.Conn.Password, "PGCONNECT_TIMEOUT=15", "LANG=C.UTF-8"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("pg_receivewal: %v: %s", err, engine.Redact(lastLine(out.String()), a.Conn.Password))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, "; ")
}

// ship stores every complete segment in the spool after the newest stored
// one, oldest first, advances the slot past it, and leaves it as the
// spool's placeholder.
func (a *WALArchiver) ship(ctx context.Context, db *pgx.Conn) error {
	entries, err := os.ReadDir(a.Spool)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case !e.Type().IsRegular():
		case len(n) == walNameLen:
			if _, _, ok := parseWAL(n, a.segSize); ok && n > a.newest && n > a.floor {
				names = append(names, n)
			}
		case strings.HasSuffix(n, ".history"):
			a.Log.Warn("the source changed timeline (a promotion): the archive continues on the new timeline; a recovery does not cross the change (a gap) until a base is taken on it", "history", n)
			os.Remove(filepath.Join(a.Spool, n))
		}
	}
	sort.Strings(names)
	for _, name := range names {
		local := filepath.Join(a.Spool, name)
		fi, err := os.Stat(local)
		if err != nil {
			return err
		}
		if fi.Size() != a.segSize {
			return fmt.Errorf("segment %s has %d bytes, not %d", name, fi.Size(), a.segSize)
		}
		tli, _, _ := parseWAL(name, a.segSize)
		seg := Segment{File: name, Timeline: tli, RawSize: fi.Size(), Next: NextWAL(name, a.segSize), ArchivedAt: time.Now().UTC()}
		seg.First, seg.Last, seg.Events = scanWAL(ctx, local)
		closedAt, closed := a.switched[name]
		if closed {
			seg.ClosedBy = closedAt.UTC()
			delete(a.switched, name)
		}
		if seg, err = put(ctx, a.Store, a.Dir, local, seg, a.Recipients); err != nil {
			return err
		}
		if closed && a.CaughtUp != nil {
			a.CaughtUp(closedAt)
		}
		a.Log.Info("archived a WAL segment", "file", name, "first", seg.First, "last", seg.Last, "transactions", seg.Events)
		prev := a.newest
		a.newest = name
		if a.Archived != nil {
			a.Archived(seg)
		}
		// The server may now recycle it: advance the slot to the next
		// segment's start.
		_, segno, _ := parseWAL(name, a.segSize)
		to := LSN((segno + 1) * uint64(a.segSize))
		if _, err := db.Exec(ctx, "SELECT pg_replication_slot_advance($1, $2::pg_lsn)", a.Slot, to.String()); err != nil {
			a.Log.Warn("advancing the replication slot", "slot", a.Slot, "to", to, "err", err)
		}
		// It stays as the placeholder pg_receivewal continues after, its
		// bytes released.
		if err := placeholder(local, a.segSize); err != nil {
			return err
		}
		if prev != "" {
			os.Remove(filepath.Join(a.Spool, prev))
		}
	}
	return nil
}
