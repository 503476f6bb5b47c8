package pitr

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cairn.dev/agent/internal/store"
)

// Base is where a dump stands in the binary log: its changes are those
// before Pos in File (mariadb-dump --master-data=2, consistent with
// --single-transaction).
type Base struct {
	File string
	Pos  int64
}

var changeMaster = regexp.MustCompile(`CHANGE MASTER TO MASTER_LOG_FILE='([^']+)', MASTER_LOG_POS=(\d+)`)

// ReadBase finds the binary log coordinates a dump recorded in its head
// (the first 64 KiB).
func ReadBase(r io.Reader) (Base, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 64<<10))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		if m := changeMaster.FindStringSubmatch(sc.Text()); m != nil {
			pos, err := strconv.ParseInt(m[2], 10, 64)
			if err != nil {
				return Base{}, err
			}
			return Base{File: m[1], Pos: pos}, nil
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return Base{}, err
	}
	return Base{}, errors.New("the dump records no binary log position (it was not taken with --master-data): it cannot be a base for point-in-time recovery")
}

// Target is the database a replay writes into (by address, like every
// restore).
type Target struct {
	Host     string
	Port     int
	User     string
	Password string
}

// Replay brings a restored base forward: it replays the changes to
// database from (the base's) in the archive under dir, from base up to (not
// including) the second until, or everything archived when until is zero
// ("latest"), into database to of target. It returns the recovery point
// reached: until, or the newest archived second. It is Prepare, then
// Apply.
func Replay(ctx context.Context, st store.Store, dir string, base Base, until time.Time, target Target, from, to, binlog, client string) (time.Time, error) {
	r, err := Prepare(ctx, st, dir, base, until)
	if err != nil {
		return time.Time{}, err
	}
	defer r.Close()
	return r.Apply(ctx, target, from, to, binlog, client)
}

// Replayer holds the checked segments of one replay.
type Replayer struct {
	base    Base
	until   time.Time
	chain   []Segment
	files   []string
	tmp     string
	reached time.Time
}

// Prepare finds the whole chain from base to until and fetches every
// segment, checked against its checksum, into a local folder — before
// anything is written anywhere: a gap, an unreadable or corrupt segment or
// a time outside the window is refused here.
func Prepare(ctx context.Context, st store.Store, dir string, base Base, until time.Time) (_ *Replayer, err error) {
	ix, err := LoadIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	chain, err := ix.Chain(base.File, until)
	if err != nil {
		return nil, err
	}
	r := &Replayer{base: base, until: until, chain: chain, reached: chain[len(chain)-1].covers()}
	if !until.IsZero() {
		r.reached = until.UTC()
	}
	if r.tmp, err = os.MkdirTemp("", "cairn-pitr-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	for _, s := range chain {
		local := filepath.Join(r.tmp, s.File)
		if err := fetch(ctx, st, dir, s, local); err != nil {
			return nil, err
		}
		r.files = append(r.files, local)
	}
	return r, nil
}

// Reached is the recovery point the replay reaches.
func (r *Replayer) Reached() time.Time { return r.reached }

// Segments are the files the replay reads, in order.
func (r *Replayer) Segments() []string {
	out := make([]string, len(r.chain))
	for i, s := range r.chain {
		out[i] = s.File
	}
	return out
}

// Close removes the fetched segments.
func (r *Replayer) Close() { os.RemoveAll(r.tmp) }

// Apply replays the fetched segments into database to of target (the
// changes to database from). The replay applies transaction by
// transaction; a failure midway leaves the target at the last applied
// transaction (the RestoreJob reports it failed; its target is a new
// database, never the source).
func (r *Replayer) Apply(ctx context.Context, target Target, from, to, binlog, client string) (time.Time, error) {
	if binlog == "" {
		binlog = "mariadb-binlog"
	}
	if client == "" {
		client = "mariadb"
	}
	args := []string{"--no-defaults", "--start-position=" + strconv.FormatInt(r.base.Pos, 10)}
	if !r.until.IsZero() {
		args = append(args, "--stop-datetime="+r.until.UTC().Format("2006-01-02 15:04:05"))
	}
	// Only the base's database, renamed to the target's (mariadb-binlog
	// filters on the name as logged, before the rewrite).
	args = append(args, "--rewrite-db="+from+"->"+to, "--database="+from)
	dec := exec.CommandContext(ctx, binlog, append(args, r.files...)...)
	// --stop-datetime is read in the program's local zone: UTC here.
	dec.Env = append(os.Environ(), "TZ=UTC")
	apply := exec.CommandContext(ctx, client, "--no-defaults", "--host="+target.Host, "--port="+strconv.Itoa(target.Port),
		"--user="+target.User, "--binary-mode")
	apply.Env = append(os.Environ(), "MYSQL_PWD="+target.Password)
	decoded, err := dec.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	in, err := apply.StdinPipe()
	if err != nil {
		return time.Time{}, err
	}
	var decErr, applyErr strings.Builder
	dec.Stderr, apply.Stderr = &decErr, &applyErr
	if err := apply.Start(); err != nil {
		return time.Time{}, err
	}
	if err := dec.Start(); err != nil {
		in.Close()
		_ = apply.Wait()
		return time.Time{}, err
	}
	ferr := withoutSourceGTIDs(in, decoded)
	in.Close()
	derr := dec.Wait()
	aerr := apply.Wait()
	switch {
	case derr != nil:
		return time.Time{}, fmt.Errorf("decoding the binary log: %w: %s", derr, strings.TrimSpace(decErr.String()))
	case aerr != nil:
		return time.Time{}, fmt.Errorf("replaying the binary log: %w: %s", aerr, strings.TrimSpace(applyErr.String()))
	case ferr != nil:
		return time.Time{}, fmt.Errorf("replaying the binary log: %w", ferr)
	}
	return r.reached, nil
}

// sourceGTID matches the decoder's lines that would make the target log a
// replayed transaction under the source's GTID (domain, server id, sequence
// number).
var sourceGTID = regexp.MustCompile(`^/\*M?!100001 SET @@session\.(gtid_domain_id|server_id|gtid_seq_no)=[0-9]+\*//\*!\*/;$`)

// withoutSourceGTIDs copies the decoded log to the client without the
// lines that set the source's GTID: the target gives each replayed
// transaction its own, so a restore into the source's server (or one of
// its replicas) never writes the source's old GTIDs out of order into its
// binary log, which would break replicas in strict mode.
func withoutSourceGTIDs(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	bw := bufio.NewWriterSize(w, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && !sourceGTID.Match(bytes.TrimRight(line, "\r\n")) {
			if _, werr := bw.Write(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}
