package pitr

import (
	"context"
	"database/sql"
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

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/store"
)

// Source is the MySQL/MariaDB server whose binary log is archived.
type Source struct {
	Host     string
	Port     int
	User     string
	Password string
}

func (s Source) dsn() string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = s.User, s.Password, "tcp", s.Host+":"+strconv.Itoa(s.Port)
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 10*time.Second, 30*time.Second, 30*time.Second
	return c.FormatDSN()
}

// Archiver streams a server's binary log into Store under Dir, one segment
// per binary log file, closing the file being written at least every
// MaxSegmentAge.
type Archiver struct {
	Source Source
	Store  store.Store
	// Dir is the archive's folder in the store.
	Dir string
	// Spool is a local folder for the files being received.
	Spool string
	// MaxSegmentAge bounds how long a change waits before it is archived
	// (the recovery point while the archiver runs).
	MaxSegmentAge time.Duration
	// ReaderID is the server id the reader announces (unique among the
	// source's replicas).
	ReaderID int
	// Recipients, when set, encrypt every segment (age), as a dump is:
	// the store holds no plaintext of the log.
	Recipients *crypt.Recipients
	// Binlog is the mariadb-binlog (or mysqlbinlog) program.
	Binlog string
	Log    *slog.Logger
	// Archived, when set, is called after each segment is stored.
	Archived func(Segment)
	// Started, when set, is called with the file reading starts at, once
	// it is chosen (a new archive's new file is open by then).
	Started func(file string)
	// CaughtUp, when set, is called with a time everything the server had
	// written before it is archived: a check that found no change since
	// the last flush once every closed file was stored, or the flush that
	// closed a file once that file is stored. The archiver's lag is the
	// time since the last one (its readiness).
	CaughtUp func(time.Time)

	// newest is the newest archived segment (from the index at start,
	// then each one stored).
	newest Segment
}

// Run archives until ctx ends. It resumes after the newest archived
// segment; when the server no longer has that file (the archiver was away
// longer than the server keeps its binary logs), it starts at the oldest
// file the server has, and the archive shows the gap (Index.Gaps).
func (a *Archiver) Run(ctx context.Context) error {
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Binlog == "" {
		a.Binlog = "mariadb-binlog"
	}
	db, err := sql.Open("mysql", a.Source.dsn())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := checkSource(ctx, db); err != nil {
		return err
	}
	start, err := a.startFile(ctx, db)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.Spool, 0o700); err != nil {
		return err
	}
	a.Log.Info("reading the binary log", "from", start)
	if a.Started != nil {
		a.Started(start)
	}
	readerCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.read(readerCtx, start) }()

	tick := min(a.MaxSegmentAge/4, 2*time.Second)
	if tick <= 0 {
		tick = time.Second
	}
	lastFlush := time.Now()
	var flushedAt time.Time // the flush that closed the file being written then
	var flushedFile string
	var since logState // the log as the last flush left it (see changedSince)
	var opened string  // the file the server writes since that flush
	flushed := false
	for {
		select {
		case <-ctx.Done():
			stop()
			<-done
			return nil
		case err := <-done:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the binary log reader stopped: %w", err)
		case <-time.After(tick):
		}
		var quiet time.Time // a check that found nothing written since the last flush
		proof := false      // ... by GTID: a proof of quiet can be stored
		if time.Since(lastFlush) >= a.MaxSegmentAge {
			// The server's clock (its events carry its times), read before
			// its log: a change committed before at is in what is read.
			at, err := serverNow(ctx, db)
			var cur logState
			if err == nil {
				cur, err = readLogState(ctx, db)
			}
			switch {
			case err != nil:
				a.Log.Warn("reading the server's binary log position", "err", err)
			case flushed && !cur.changedSince(since):
				if flushedFile == "" {
					// A proof only on a GTID baseline: a position read
					// after the flush may already hold a transaction.
					quiet, proof = at, cur.gtid != nil && since.gtid != nil
				}
			default: // changes since the last flush (or none made yet)
				if _, err := db.ExecContext(ctx, "FLUSH BINARY LOGS"); err != nil {
					a.Log.Warn("closing the current binary log file", "err", err)
					break
				}
				flushedAt, flushedFile, flushed = at, cur.file, true
				after, err := currentPosition(ctx, db)
				if err != nil {
					after = position{}
				}
				opened, since = after.file, cur
				if cur.gtid == nil {
					// No GTID state: the position right after the flush is
					// the baseline (a change between the flush and this
					// read is seen only with the next one; no proof of
					// quiet is stored on this footing).
					since = logState{position: after}
				}
			}
			lastFlush = time.Now()
		}
		shipped, err := a.ship(ctx, flushedFile, flushedAt)
		if err != nil {
			a.Log.Warn("storing closed segments", "err", err)
			continue
		}
		if shipped {
			// The file the last flush closed is stored: everything
			// written before that flush is.
			if a.CaughtUp != nil {
				a.CaughtUp(flushedAt)
			}
			flushedFile = ""
		}
		switch {
		case proof:
			a.proveQuiet(ctx, opened, quiet)
		case !quiet.IsZero() && a.CaughtUp != nil:
			a.CaughtUp(quiet)
		}
	}
}

// proveQuiet records that nothing was written after the newest archived
// segment until at (the server's clock): the server has been writing file
// (which holds nothing but its header) since the flush that closed that
// segment. An idle server's recoverable window then keeps moving, and a
// base taken in file is recoverable with no segment (Index.quietFrom), as
// the WAL archiver's proof does for PostgreSQL.
func (a *Archiver) proveQuiet(ctx context.Context, file string, at time.Time) {
	if a.newest.File == "" || a.newest.Next != file {
		return // the newest stored segment is not the one the server continued from
	}
	if err := putCovered(ctx, a.Store, a.Dir, Covered{Through: a.newest.File, At: at.UTC()}); err != nil {
		a.Log.Warn("recording the archive's proof of quiet", "err", err)
		return
	}
	if a.CaughtUp != nil {
		a.CaughtUp(at)
	}
}

// serverNow is the server's clock.
func serverNow(ctx context.Context, db *sql.DB) (time.Time, error) {
	var us int64
	if err := db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)").Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("reading the server's clock: %w", err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// checkSource refuses a server whose binary log cannot serve recovery.
func checkSource(ctx context.Context, db *sql.DB) error {
	var logBin int
	var format string
	if err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&logBin, &format); err != nil {
		return fmt.Errorf("reading the source's binary log settings: %w", err)
	}
	if logBin != 1 {
		return errors.New("the source writes no binary log (log_bin is OFF): point-in-time recovery needs it on")
	}
	if !strings.EqualFold(format, "ROW") {
		return fmt.Errorf("the source's binlog_format is %s: point-in-time recovery needs ROW (a statement log replays differently)", format)
	}
	return nil
}

// startFile is where reading resumes: the file after the newest archived
// segment, if the server still has it; else the oldest file the server
// has (a gap) or, for a new archive, a new file opened now.
func (a *Archiver) startFile(ctx context.Context, db *sql.DB) (string, error) {
	ix, err := LoadIndex(ctx, a.Store, a.Dir)
	if err != nil {
		return "", err
	}
	files, err := serverFiles(ctx, db)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", errors.New("the source lists no binary log files")
	}
	newest, ok := ix.Newest()
	a.newest = newest
	if !ok {
		// A new archive starts in a new file: the one being written may be
		// large and holds nothing a base taken from now on needs.
		if _, err := db.ExecContext(ctx, "FLUSH BINARY LOGS"); err != nil {
			return "", fmt.Errorf("opening a new binary log file to start the archive in: %w", err)
		}
		cur, err := currentPosition(ctx, db)
		if err != nil {
			return "", err
		}
		return cur.file, nil
	}
	want := newest.Next
	if newest.Stopped || want == "" {
		want = nextFile(newest.File)
	}
	for _, f := range files {
		if f == want {
			return want, nil
		}
	}
	a.Log.Warn("the server no longer has the next binary log file: the archive has a gap", "after", newest.File, "missing", want, "resumingAt", files[0])
	return files[0], nil
}

func serverFiles(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("listing the source's binary logs: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var files []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		files = append(files, text(vals[0]))
	}
	return files, rows.Err()
}

// position is a place in the server's binary log.
type position struct {
	file string
	pos  int64
}

// logState is where the server's binary log stands: the position it writes
// next and, when the server keeps one, its GTID state (nil when not).
type logState struct {
	position
	gtid *string
}

// changedSince: a transaction was logged since s. By GTID state when the
// server keeps one — the position also moves with what the server logs on
// its own (MariaDB's binlog checkpoint events after a flush), which is no
// change to data — else by position.
func (l logState) changedSince(s logState) bool {
	if l.gtid != nil && s.gtid != nil {
		return *l.gtid != *s.gtid
	}
	return l.position != s.position
}

// readLogState reads the GTID state, then the position: a transaction
// logged before the GTID state was read is in both.
func readLogState(ctx context.Context, db *sql.DB) (logState, error) {
	var l logState
	var gtid sql.NullString
	// MariaDB's, then MySQL's (empty with gtid_mode OFF: no state kept).
	err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&gtid)
	if err != nil {
		err = db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&gtid)
		if err == nil && gtid.String == "" {
			gtid.Valid = false
		}
	}
	if err == nil && gtid.Valid {
		l.gtid = &gtid.String
	}
	p, err := currentPosition(ctx, db)
	l.position = p
	return l, err
}

// currentPosition is where the server writes next (SHOW MASTER STATUS).
func currentPosition(ctx context.Context, db *sql.DB) (position, error) {
	rows, err := db.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return position{}, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return position{}, errors.New("SHOW MASTER STATUS returned nothing")
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return position{}, err
	}
	pos, err := strconv.ParseInt(text(vals[1]), 10, 64)
	return position{file: text(vals[0]), pos: pos}, err
}

// read runs the binary log reader until ctx ends: the server's files,
// byte for byte, into the spool folder.
func (a *Archiver) read(ctx context.Context, start string) error {
	cmd := exec.CommandContext(ctx, a.Binlog, "--no-defaults", "--read-from-remote-server",
		"--host="+a.Source.Host, "--port="+strconv.Itoa(a.Source.Port), "--user="+a.Source.User,
		"--raw", "--stop-never", "--stop-never-slave-server-id="+strconv.Itoa(a.ReaderID),
		"--result-file="+a.Spool+string(filepath.Separator), start)
	// The password goes in the environment, never in the arguments.
	cmd.Env = childEnv("MYSQL_PWD=" + a.Source.Password)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%s: %w: %s", a.Binlog, err, strings.TrimSpace(string(out)))
}

// ship stores every closed file in the spool, oldest first, then removes
// it. flushedFile/flushedAt: the archiver's last flush closed that file at
// that time; shipped says that file was stored now.
func (a *Archiver) ship(ctx context.Context, flushedFile string, flushedAt time.Time) (shipped bool, err error) {
	entries, err := os.ReadDir(a.Spool)
	if err != nil {
		return false, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		local := filepath.Join(a.Spool, name)
		f, err := os.Open(local)
		if err != nil {
			return shipped, err
		}
		sum, err := ScanFile(f)
		f.Close()
		if err != nil {
			return shipped, fmt.Errorf("%s: %w", name, err)
		}
		if !sum.Closed() {
			break // the file being written, and nothing after it
		}
		seg := Segment{File: name, RawSize: sum.Size, First: sum.First, Last: sum.Last, Events: sum.Events,
			Next: sum.Next, Stopped: sum.Stopped, ArchivedAt: time.Now().UTC()}
		if name == flushedFile {
			seg.ClosedBy = flushedAt.UTC().Truncate(time.Second)
		}
		if seg, err = put(ctx, a.Store, a.Dir, local, seg, a.Recipients); err != nil {
			return shipped, err
		}
		a.newest = seg
		if err := os.Remove(local); err != nil {
			return shipped, err
		}
		if name == flushedFile {
			shipped = true
		}
		a.Log.Info("archived a binary log segment", "file", name, "first", seg.First, "last", seg.Last, "events", seg.Events)
		if a.Archived != nil {
			a.Archived(seg)
		}
	}
	return shipped, nil
}

// text is a column's value as text, whatever type the driver scanned.
func text(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}
