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

	"cairn.dev/agent/internal/crypt"
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
// Apply. ids decrypt the encrypted segments (nil: none given).
func Replay(ctx context.Context, st store.Store, dir string, base Base, until time.Time, target Target, from, to, binlog, client string, ids *crypt.Identities) (time.Time, error) {
	live, err := LiveSchemas(ctx, target, client)
	if err != nil {
		return time.Time{}, err
	}
	r, err := PrepareLive(ctx, st, dir, base, until, from, to, binlog, ids, live)
	if err != nil {
		return time.Time{}, err
	}
	defer r.Close()
	return r.Apply(ctx, target, client)
}

// Replayer holds the checked segments of one replay.
type Replayer struct {
	from, to, binlog string
	base             Base
	until            time.Time
	chain            []Segment
	files            []string
	tmp              string
	reached          time.Time
}

// Prepare finds the whole chain from base to until and fetches every
// segment, checked against its checksum, into a local folder — before
// anything is written anywhere: a gap, an unreadable or corrupt segment, an
// encrypted one ids cannot decrypt, or a time outside the window is
// refused here (segments are decrypted with ids into the private folder,
// removed by Close). So is a log with a statement
// that names database from itself while the replay goes into another
// (to): --rewrite-db renames the default database, not `from`.table or
// DROP DATABASE from, which replayed would change the source.
func Prepare(ctx context.Context, st store.Store, dir string, base Base, until time.Time, from, to, binlog string, ids *crypt.Identities) (*Replayer, error) {
	return PrepareLive(ctx, st, dir, base, until, from, to, binlog, ids, nil)
}

// PrepareLive is Prepare with the target server's schemas (LiveSchemas):
// every statement of the replay is checked against them too
// (StatementPolicy), so a statement on another live schema refuses the
// replay before the target is touched.
func PrepareLive(ctx context.Context, st store.Store, dir string, base Base, until time.Time, from, to, binlog string, ids *crypt.Identities, live map[string]bool) (_ *Replayer, err error) {
	if binlog == "" {
		binlog = "mariadb-binlog"
	}
	ix, err := LoadIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	chain, err := ix.Chain(base.File, until)
	if err != nil {
		return nil, err
	}
	if err := CheckKeys(st, dir, chain, ids); err != nil {
		return nil, err
	}
	r := &Replayer{from: from, to: to, binlog: binlog, base: base, until: until, chain: chain}
	switch {
	case !until.IsZero():
		r.reached = until.UTC()
	case len(chain) == 0:
		// Latest from a base taken while the server was idle: nothing to
		// replay, and the proof of quiet is how far that holds.
		r.reached = ix.WindowFrom(base).Latest
	default:
		r.reached = ix.coversThrough(chain[len(chain)-1])
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
		if err := fetch(ctx, st, dir, s, local, ids); err != nil {
			return nil, err
		}
		r.files = append(r.files, local)
	}
	if len(r.files) > 0 {
		// Decoded once before anything is applied: every statement
		// checked (binlogcheck.go); the target's live schemas are checked
		// again by Apply.
		dec := r.decoder(ctx)
		out, err := dec.StdoutPipe()
		if err != nil {
			return nil, err
		}
		var decErr strings.Builder
		dec.Stderr = &decErr
		if err := dec.Start(); err != nil {
			return nil, err
		}
		serr := copyChecked(io.Discard, out, StatementPolicy{From: from, To: to, Live: live}.Check)
		if serr != nil {
			_ = dec.Process.Kill()
		}
		derr := dec.Wait()
		if serr != nil {
			return nil, serr
		}
		if derr != nil {
			return nil, fmt.Errorf("decoding the binary log: %w: %s", derr, strings.TrimSpace(decErr.String()))
		}
	}
	return r, nil
}

// decoder is the mariadb-binlog command of the replay: the base's
// database only, renamed to the target's, up to the recovery target.
func (r *Replayer) decoder(ctx context.Context) *exec.Cmd {
	args := []string{"--no-defaults", "--start-position=" + strconv.FormatInt(r.base.Pos, 10)}
	if !r.until.IsZero() {
		args = append(args, "--stop-datetime="+r.until.UTC().Format("2006-01-02 15:04:05"))
	}
	// mariadb-binlog filters on the name as logged, before the rewrite.
	args = append(args, "--rewrite-db="+r.from+"->"+r.to, "--database="+r.from)
	dec := exec.CommandContext(ctx, r.binlog, append(args, r.files...)...)
	// --stop-datetime is read in the program's local zone: UTC here.
	dec.Env = childEnv("TZ=UTC")
	return dec
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
func (r *Replayer) Apply(ctx context.Context, target Target, client string) (time.Time, error) {
	if client == "" {
		client = "mariadb"
	}
	if len(r.files) == 0 {
		return r.reached, nil // a base taken while the server was idle: nothing to replay
	}
	live, err := LiveSchemas(ctx, target, client)
	if err != nil {
		return time.Time{}, err
	}
	dec := r.decoder(ctx)
	apply := exec.CommandContext(ctx, client, "--no-defaults", "--host="+target.Host, "--port="+strconv.Itoa(target.Port),
		"--user="+target.User, "--binary-mode", "--local-infile=0")
	apply.Env = childEnv("MYSQL_PWD=" + target.Password)
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
	// Checked by Prepare; again on the way, with the target's schemas.
	guard := StatementPolicy{From: r.from, To: r.to, Live: live}.Check
	ferr := copyChecked(in, decoded, guard)
	if ferr != nil {
		_ = dec.Process.Kill()
		_ = apply.Process.Kill()
	}
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

// copyChecked copies the decoded log to the client statement by statement
// (split as the client splits it), without the statements that set the
// source's GTID (the target gives each replayed transaction its own, so a
// restore into the source's server, or one of its replicas, never writes
// the source's old GTIDs out of order into its binary log, which would
// break replicas in strict mode), and stops, before writing it, at the
// first statement check refuses.
func copyChecked(w io.Writer, r io.Reader, check func(Statement) error) error {
	sp := newSplitter(r)
	bw := bufio.NewWriterSize(w, 1<<20)
	for {
		raw, st, err := sp.next()
		if errors.Is(err, io.EOF) {
			return bw.Flush()
		}
		if err != nil {
			return err
		}
		if cerr := check(st); cerr != nil {
			return cerr
		}
		if gtidSet.MatchString(joinTokens(st.Tokens)) {
			if i := bytes.LastIndexByte(bytes.TrimRight(raw, "\n"), '\n'); sourceGTID.Match(bytes.TrimSpace(raw[i+1:])) {
				raw = raw[:i+1]
			}
		}
		if _, err := bw.Write(raw); err != nil {
			return err
		}
	}
}

// sourceGTID matches the decoder's lines that would make the target log a
// replayed transaction under the source's GTID (domain, server id, sequence
// number); gtidSet the statement they hold.
var (
	sourceGTID = regexp.MustCompile(`^/\*M?!100001 SET @@session\.(gtid_domain_id|server_id|gtid_seq_no)=[0-9]+\*//\*!\*/;$`)
	gtidSet    = regexp.MustCompile(`^SET@@session\.(gtid_domain_id|server_id|gtid_seq_no)=[0-9]+$`)
)

// ErrNamesSource: the log holds a statement naming the source database.
var ErrNamesSource = errors.New("the binary log names the source database explicitly")

// LiveSchemas lists the schemas of the target server: a replayed statement
// naming one of them is refused. client is the mariadb client ("": mariadb).
func LiveSchemas(ctx context.Context, target Target, client string) (map[string]bool, error) {
	if client == "" {
		client = "mariadb"
	}
	cmd := exec.CommandContext(ctx, client, "--no-defaults", "--host="+target.Host, "--port="+strconv.Itoa(target.Port),
		"--user="+target.User, "--batch", "--skip-column-names", "--local-infile=0", "--execute=SHOW DATABASES")
	cmd.Env = childEnv("MYSQL_PWD=" + target.Password)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("listing the target server's schemas: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	live := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			live[l] = true
		}
	}
	return live, nil
}

// childEnv is the environment of a tool the replay or the archiver runs:
// nothing of the agent's (its store and encryption secrets) but what the
// tool needs; the one password a tool needs is passed by the caller.
func childEnv(extra ...string) []string {
	env := []string{"LANG=C.UTF-8"}
	if p, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+p)
	} else {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	if t, ok := os.LookupEnv("TMPDIR"); ok {
		env = append(env, "TMPDIR="+t)
	}
	return append(env, extra...)
}
