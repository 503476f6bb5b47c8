package pitr

// PostgreSQL point-in-time recovery: the write-ahead log, archived segment
// by segment (docs/pitr.md, "PostgreSQL: the write-ahead log").

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/store"
)

// walNameLen is the length of a WAL segment file name: timeline, log and
// segment, 8 hex digits each.
const walNameLen = 24

// PGBinDir is where Debian's postgresql-15 puts the server's own programs
// (postgres, pg_waldump); the client programs are on PATH.
const PGBinDir = "/usr/lib/postgresql/15/bin"

// PGTool finds a PostgreSQL program: on PATH, else in PGBinDir.
func PGTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join(PGBinDir, name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found on PATH nor in %s: install postgresql-15", name, PGBinDir)
}

// LSN is a position in the write-ahead log.
type LSN uint64

// ParseLSN reads "16/B374D848".
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xffffffff) }

// WALName is the file name of the segment holding lsn on timeline tli, for
// segments of segSize bytes.
func WALName(tli int, lsn LSN, segSize int64) string {
	segno := uint64(lsn) / uint64(segSize)
	return walFile(tli, segno, segSize)
}

func walFile(tli int, segno uint64, segSize int64) string {
	per := uint64(0x100000000) / uint64(segSize)
	return fmt.Sprintf("%08X%08X%08X", tli, segno/per, segno%per)
}

// parseWAL reads a segment file name: its timeline and segment number.
func parseWAL(name string, segSize int64) (tli int, segno uint64, ok bool) {
	if len(name) != walNameLen {
		return 0, 0, false
	}
	t, err1 := strconv.ParseUint(name[:8], 16, 32)
	lg, err2 := strconv.ParseUint(name[8:16], 16, 32)
	sg, err3 := strconv.ParseUint(name[16:], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	per := uint64(0x100000000) / uint64(segSize)
	return int(t), lg*per + sg, true
}

// NextWAL is the segment after name on the same timeline.
func NextWAL(name string, segSize int64) string {
	tli, segno, ok := parseWAL(name, segSize)
	if !ok {
		return ""
	}
	return walFile(tli, segno+1, segSize)
}

// SlotName is the physical replication slot of a BackupJob's archiver
// ("<namespace>/<name>"): deterministic, so a restarted archiver (or the
// operator's watchdog) finds it; readable where the name allows, and made
// unique by a hash of the whole key. At most 63 characters of [a-z0-9_].
func SlotName(job string) string {
	sum := sha256.Sum256([]byte(job))
	readable := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(job))
	const prefix = "cairn_pitr_"
	suffix := "_" + hex.EncodeToString(sum[:4])
	if max := 63 - len(prefix) - len(suffix); len(readable) > max {
		readable = readable[:max]
	}
	return prefix + readable + suffix
}

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

// Covered is the archive's newest proof of quiet: at At (the server's
// clock), nothing had changed since segment Through was closed, so every
// change committed before At is archived. An idle server gets no new
// segment; this keeps its recoverable window moving (one small object,
// rewritten every MaxSegmentAge while the server is idle).
type Covered struct {
	Through string    `json:"through"`
	At      time.Time `json:"at"`
}

// CoveredKey is the store key of the archive's Covered record.
func CoveredKey(dir string) string { return path.Join(dir, "covered") }

func (a *WALArchiver) putCovered(ctx context.Context, c Covered) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = a.Store.Put(ctx, CoveredKey(a.Dir), bytes.NewReader(b))
	return err
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

// slotState is the archiver's slot as the server has it.
type slotState struct {
	exists   bool
	restart  LSN
	lost     bool
	retained int64
	active   bool
}

func readSlot(ctx context.Context, db *pgx.Conn, slot string) (slotState, error) {
	var restart *string
	var status *string
	var retained *int64
	var active bool
	err := db.QueryRow(ctx, `SELECT restart_lsn::text, wal_status, (pg_current_wal_lsn() - restart_lsn)::bigint, active
  FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&restart, &status, &retained, &active)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}, nil
	}
	if err != nil {
		return slotState{}, fmt.Errorf("reading replication slot %s: %w", slot, err)
	}
	s := slotState{exists: true, active: active}
	if retained != nil {
		s.retained = *retained
	}
	if restart != nil {
		if s.restart, err = ParseLSN(*restart); err != nil {
			return s, err
		}
	}
	s.lost = restart == nil || status != nil && *status == "lost"
	return s, nil
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
		" user=" + engine.QuoteConninfo(a.Conn.User) + " application_name=" + engine.QuoteConninfo(a.Slot)
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

// loop ships segments and closes the current one every MaxSegmentAge, until
// ctx ends or the reader stops (its error).
func (a *WALArchiver) loop(ctx context.Context, db *pgx.Conn, done <-chan error, tick time.Duration) error {
	lastSwitch := time.Now()
	var opened switchState // the server right after the archiver's last switch
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case err := <-done:
			return err
		case <-time.After(tick):
		}
		if time.Since(lastSwitch) >= a.MaxSegmentAge {
			if err := a.switchWAL(ctx, db, &opened); err != nil {
				a.Log.Warn("closing the current WAL segment", "err", err)
			}
			lastSwitch = time.Now()
		}
		if err := a.ship(ctx, db); err != nil {
			a.Log.Warn("storing closed segments", "err", err)
			if n := a.unshipped(); n >= MaxSpoolSegments {
				return fmt.Errorf("%w (%d segments): %v", errSpoolFull, n, err)
			}
		}
		if err := a.watch(ctx, db); err != nil {
			a.Log.Warn("checking the replication slot", "err", err)
		}
	}
}

// switchState is what the archiver compares to know whether the segment
// being written holds changes since its last switch.
type switchState struct {
	lsn LSN
	// xmax is the next transaction id to be assigned: every change to
	// data (sequences and DDL included) is made by a transaction with an
	// id, so an unchanged xmax means no new change began. running: some
	// transaction was in progress (it may commit without a new id).
	xmax    uint64
	running bool
	// now is the server's clock when it was read.
	now time.Time
}

func readSwitchState(ctx context.Context, db *pgx.Conn) (switchState, error) {
	var s switchState
	var lsn string
	var xmin uint64
	err := db.QueryRow(ctx, `SELECT clock_timestamp(), pg_current_wal_insert_lsn()::text, pg_snapshot_xmin(pg_current_snapshot())::text::numeric::bigint,
  pg_snapshot_xmax(pg_current_snapshot())::text::numeric::bigint`).Scan(&s.now, &lsn, &xmin, &s.xmax)
	if err != nil {
		return s, err
	}
	s.running = xmin < s.xmax
	s.lsn, err = ParseLSN(lsn)
	return s, err
}

// switchWAL closes the segment being written if it holds changes since
// the archiver's last switch: every change committed before the switch is
// then in a closed segment. WAL the server writes on its own while idle
// (checkpoints, its running-transactions records) closes nothing: an idle
// server does not get a new segment every MaxSegmentAge.
func (a *WALArchiver) switchWAL(ctx context.Context, db *pgx.Conn, opened *switchState) error {
	cur, err := readSwitchState(ctx, db)
	if err != nil {
		return err
	}
	a.Log.Debug("segment age reached", "lsn", cur.lsn, "xmax", cur.xmax, "running", cur.running,
		"lastLSN", opened.lsn, "lastXmax", opened.xmax, "lastRunning", opened.running)
	if cur.lsn == opened.lsn || cur.xmax == opened.xmax && !opened.running && !cur.running {
		// Nothing since the last switch: once the segment it closed is
		// stored, every change committed before now is archived.
		if a.lastClosed != "" && a.newest >= a.lastClosed {
			if err := a.putCovered(ctx, Covered{Through: a.newest, At: cur.now.UTC()}); err != nil {
				return err
			}
			if a.CaughtUp != nil {
				a.CaughtUp(cur.now)
			}
		}
		return nil
	}
	// The state read before the switch is the next one's baseline: what
	// it holds is before the switch; a change that slips in between is
	// seen next time.
	// The server's clock right before the switch: commit times are its.
	var at time.Time
	var end, tliS string
	if err := db.QueryRow(ctx, "SELECT clock_timestamp(), pg_switch_wal()::text, (SELECT timeline_id FROM pg_control_checkpoint())::text").Scan(&at, &end, &tliS); err != nil {
		return err
	}
	endLSN, err := ParseLSN(end)
	if err != nil {
		return err
	}
	tli, _ := strconv.Atoi(tliS)
	if endLSN > 0 {
		a.lastClosed = WALName(tli, endLSN-1, a.segSize)
		a.switched[a.lastClosed] = at
	}
	*opened = cur
	return nil
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
		if seg, err = put(ctx, a.Store, a.Dir, local, seg); err != nil {
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

// watch drops the slot when it retains more than MaxRetainedWALBytes.
func (a *WALArchiver) watch(ctx context.Context, db *pgx.Conn) error {
	if a.MaxRetainedWALBytes <= 0 {
		return nil
	}
	r, err := WatchSlot(ctx, db, a.Slot, a.MaxRetainedWALBytes)
	if err == nil && r.Dropped {
		a.Log.Warn("dropped the archiver's replication slot: it retained more WAL than the limit (the archive has fallen behind and will show a gap)",
			"slot", a.Slot, "retainedBytes", r.RetainedBytes, "limit", a.MaxRetainedWALBytes)
	}
	return err
}

// SlotReport is what the watchdog saw of the archiver's slot.
type SlotReport struct {
	Slot          string
	Exists        bool
	Active        bool
	RetainedBytes int64
	Dropped       bool
	// MaxSlotWALKeepSize is the server's own bound ("-1": none).
	MaxSlotWALKeepSize string
}

// ReleaseSlot as WatchSlot's limit drops the slot whatever it retains.
const ReleaseSlot = -1

// WatchSlot reads the slot's retained WAL and drops the slot when it is
// above limit (limit > 0), or whatever it retains (limit ReleaseSlot): the
// source is never held back by an archive that fell behind, nor by one
// that is gone. A walsender holding the slot is ended first.
func WatchSlot(ctx context.Context, db *pgx.Conn, slot string, limit int64) (SlotReport, error) {
	r := SlotReport{Slot: slot}
	if err := db.QueryRow(ctx, "SELECT current_setting('max_slot_wal_keep_size')").Scan(&r.MaxSlotWALKeepSize); err != nil {
		return r, err
	}
	s, err := readSlot(ctx, db, slot)
	if err != nil {
		return r, err
	}
	r.Exists, r.Active, r.RetainedBytes = s.exists, s.active, s.retained
	if !s.exists || limit == 0 || (limit > 0 && s.retained <= limit) {
		return r, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid *int32
		err := db.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			r.Dropped = true
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if pid != nil {
			db.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid)
		}
		if _, err = db.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
			r.Dropped = true
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("dropping replication slot %s: %w", slot, err)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(200 * time.Millisecond): // the bounded wait for its holder to exit
		}
	}
}

// commitLine matches pg_waldump's transaction records with their time.
var commitLine = regexp.MustCompile(`desc: (?:COMMIT|ABORT) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([A-Za-z]+)`)

// scanWAL reads the commit and abort times of a segment with pg_waldump:
// the first and last, and how many. Records that cross into the segment
// before or after are not seen (pg_waldump reads one file); they only
// make the times a little narrower than the segment's. A segment that
// cannot be read gives zero times (the record then says nothing of its
// times; recovery still replays it).
func scanWAL(ctx context.Context, path string) (first, last time.Time, n int) {
	bin, err := PGTool("pg_waldump")
	if err != nil {
		return
	}
	cmd := exec.CommandContext(ctx, bin, "--rmgr=Transaction", path)
	cmd.Env = []string{"TZ=UTC", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	if cmd.Start() != nil {
		return
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := commitLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, err := time.Parse("2006-01-02 15:04:05.999999", m[1])
		if err != nil || m[2] != "UTC" {
			continue
		}
		if first.IsZero() {
			first = t
		}
		if t.After(last) {
			last = t
		}
		n++
	}
	_ = cmd.Wait() // pg_waldump ends in an error at the end of the segment's records
	return first, last, n
}

// BackupLabel is what a base backup's backup_label says of its start.
type BackupLabel struct {
	StartLSN  LSN
	File      string
	Timeline  int
	StartTime time.Time
}

var (
	labelStart    = regexp.MustCompile(`(?m)^START WAL LOCATION: ([0-9A-Fa-f]+/[0-9A-Fa-f]+) \(file ([0-9A-F]{24})\)`)
	labelTimeline = regexp.MustCompile(`(?m)^START TIMELINE: (\d+)`)
	labelTime     = regexp.MustCompile(`(?m)^START TIME: (.+)$`)
)

// ParseBackupLabel reads a backup_label.
func ParseBackupLabel(b []byte) (BackupLabel, error) {
	var l BackupLabel
	m := labelStart.FindSubmatch(b)
	if m == nil {
		return l, errors.New("the base backup's stream held no backup_label with its WAL start")
	}
	var err error
	if l.StartLSN, err = ParseLSN(string(m[1])); err != nil {
		return l, err
	}
	l.File = string(m[2])
	l.Timeline, _ = strconv.Atoi(l.File[:8])
	if t := labelTimeline.FindSubmatch(b); t != nil {
		l.Timeline, _ = strconv.Atoi(string(t[1]))
	}
	if t := labelTime.FindSubmatch(b); t != nil {
		if st, err := time.Parse("2006-01-02 15:04:05 MST", strings.TrimSpace(string(t[1]))); err == nil {
			l.StartTime = st.UTC()
		}
	}
	return l, nil
}
