package main

// The point-in-time bench (issue 27): the archive's lag under a write load
// and the replay throughput of a restore to a time, for PostgreSQL (WAL,
// pitr.WALArchiver) and MariaDB (binary log, pitr.Archiver), in one run.
//
// Each engine gets a private server of its own (PostgreSQL 15 as the other
// cases' one is; MariaDB with its binary log on, ROW), and the agent's real
// archivers run in this process against it into the bench's versitygw
// bucket, as `agent archive` runs them (same fields, same store code). The
// write load is a Go client on several connections: for PostgreSQL
// pgbench's built-in TPC-B-like script on pgbench's schema (7 round trips a
// transaction, as pgbench in its default simple protocol), for MariaDB
// sysbench's oltp_write_only transaction (an indexed UPDATE, a non-indexed
// UPDATE, a DELETE and an INSERT of one row of one of four tables) plus one
// INSERT into a commit log table (what counts a restore's transactions). A
// Go client, not pgbench itself, because the lag is measured per committed
// transaction and needs each one's log position, which pgbench cannot
// report: right after each COMMIT, on the same connection, the client asks
// the server where its log ends (PostgreSQL: pg_walfile_name of
// pg_current_wal_insert_lsn(), in the COMMIT's own round trip; MariaDB:
// SHOW MASTER STATUS, one more round trip), which is at or after the
// transaction's commit record: the segment holding that position holds the
// commit (or, when the archiver closed a segment between the two, the next
// one: the lag is then overstated, never understated).
//
// Lag of a committed transaction: from the client's clock right after its
// COMMIT returned to the moment the archiver reported (its Archived
// callback, called once the segment's object and then its record are
// written to the store) the segment holding the commit stored. Every
// commit of the load counts: the bench waits after the load until the last
// one is archived.

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

// The point-in-time bench's flags.
var (
	pitrEngines string
	pitrAges    string
	pitrLoad    time.Duration
	pitrClients int
	pitrScale   int
	pitrOverlap bool
)

// pitrFlags declares the point-in-time bench's flags.
func pitrFlags() {
	flag.StringVar(&pitrEngines, "pitr", "postgres,mysql", "point-in-time bench (archive lag under a write load, restore to a time): engines, comma-separated (postgres, mysql; empty: none)")
	flag.StringVar(&pitrAges, "pitr-ages", "10s,1m", "with -pitr: the archivers' max segment ages to measure the lag at, comma-separated (the agent's default is 1m); the first also carries the restore")
	flag.DurationVar(&pitrLoad, "pitr-load", 30*time.Second, "with -pitr: how long the write load runs for the restore's run (at least each age: a whole segment period)")
	flag.IntVar(&pitrClients, "pitr-clients", 4, "with -pitr: the write load's connections")
	flag.BoolVar(&pitrOverlap, "pitr-overlap", true, "with -pitr: measure the ages after the first (lag only) on both engines at once")
	flag.IntVar(&pitrScale, "pitr-scale", 4, "with -pitr: pgbench scale of the PostgreSQL database (100,000 accounts each; MariaDB: 4 tables of 6,250 × scale rows)")
}

// defaultSegmentAge is the agent's CAIRN_MAX_SEGMENT_AGE default.
const defaultSegmentAge = time.Minute

// lagRow is one archive-lag measurement.
type lagRow struct {
	engine  string
	age     time.Duration
	clients int
	commits int
	load    time.Duration
	logMB   float64
	lags    []time.Duration // sorted
	// segments holding the load's commits.
	segments int
	// overlap: the other engine's load ran at the same time.
	overlap bool
}

// restoreRow is one restore measurement.
type restoreRow struct {
	engine, config string
	total          time.Duration
	// base and replay: the restore's parts as its log times them (zero:
	// not separable).
	base, replay time.Duration
	// pre: verifying the artifact and fetching and checking the archived
	// segments (MariaDB: and decoding them once, the source guard), before
	// the base; post: PostgreSQL's copy of the recovered database into the
	// target, after the replay.
	pre, post time.Duration
	// txs: the restored database's transactions of the load; wantTxs: the
	// load's commits that returned before the target (-1: no target).
	txs, wantTxs int
	logMB        float64
	// source: the load's write rate (tx/s).
	source float64
	dbMB   float64
}

// pitrEnv is one engine's point-in-time bench.
type pitrEnv struct {
	e      *env
	engine string // "postgres" or "mysql"
	pg     *testenv.Postgres
	my     *testenv.MariaDB
	st     store.Store
	db     string
	agent  []string // the agent's database environment (no database)
	prefix string   // job name prefix
	// PostgreSQL: wal_segment_size.
	segSize int64
}

func (e *env) pitrBench(engines []string, ages []time.Duration) ([]lagRow, []restoreRow, error) {
	st, err := store.NewS3(store.S3Config{Endpoint: e.s3.Endpoint(), Bucket: bucket, Insecure: true, Region: "us-east-1",
		AccessKey: accessKey, SecretKey: secretKey})
	if err != nil {
		return nil, nil, err
	}
	var ps []*pitrEnv
	defer func() {
		for _, p := range ps {
			p.stop()
		}
	}()
	for _, eng := range engines {
		p := &pitrEnv{e: e, engine: eng, st: st, db: "pitr_src"}
		switch eng {
		case "postgres":
			fmt.Fprintln(os.Stderr, "bench: pitr: starting a private PostgreSQL 15")
			if p.pg, err = testenv.StartPostgres(password); err != nil {
				return nil, nil, err
			}
			p.agent = []string{"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(p.pg.Port),
				"CAIRN_DB_USER=" + p.pg.User, "CAIRN_DB_PASSWORD=" + p.pg.Password}
			p.prefix = "pitr-pg"
		case "mysql":
			fmt.Fprintln(os.Stderr, "bench: pitr: starting a private MariaDB with its binary log on (ROW)")
			if p.my, err = testenv.StartMariaDBWithBinlog("bench", password); err != nil {
				return nil, nil, err
			}
			e.pitrMyVersion, _ = p.my.SQL("", "SELECT VERSION()")
			p.agent = []string{"CAIRN_ENGINE=mysql", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(p.my.Port),
				"CAIRN_DB_USER=" + p.my.User, "CAIRN_DB_PASSWORD=" + p.my.Password}
			p.prefix = "pitr-my"
		default:
			return nil, nil, fmt.Errorf("-pitr: unknown engine %q (postgres, mysql)", eng)
		}
		ps = append(ps, p)
	}
	// The first age: each engine alone, with the restores.
	lagsBy := make([][]lagRow, len(ps))
	var restores []restoreRow
	for i, p := range ps {
		fmt.Fprintf(os.Stderr, "bench: pitr %s: generating the database (scale %d)\n", p.engine, pitrScale)
		if err := p.generate(); err != nil {
			return nil, nil, fmt.Errorf("pitr %s: %w", p.engine, err)
		}
		l, r, err := p.once(p.job(0), ages[0], max(pitrLoad, ages[0]), true)
		if err != nil {
			return nil, nil, fmt.Errorf("pitr %s: %w", p.engine, err)
		}
		lagsBy[i], restores = append(lagsBy[i], l), append(restores, r...)
	}
	// The other ages: the lag only, under one whole segment period of
	// load; with -pitr-overlap the engines at once (each its own server,
	// archiver and load), which halves the time and shares the cores.
	for k, age := range ages[1:] {
		errs := make([]error, len(ps))
		rows := make([]lagRow, len(ps))
		var wg sync.WaitGroup
		for i, p := range ps {
			f := func() { rows[i], _, errs[i] = p.once(p.job(k+1), age, age, false) }
			if pitrOverlap && len(ps) > 1 {
				wg.Go(f)
			} else {
				f()
			}
		}
		wg.Wait()
		for i, p := range ps {
			if errs[i] != nil {
				return nil, nil, fmt.Errorf("pitr %s: %w", p.engine, errs[i])
			}
			rows[i].overlap = pitrOverlap && len(ps) > 1
			lagsBy[i] = append(lagsBy[i], rows[i])
		}
	}
	var lags []lagRow
	for _, l := range lagsBy {
		lags = append(lags, l...)
	}
	return lags, restores, nil
}

func (p *pitrEnv) job(i int) naming.Job {
	return naming.Job{Namespace: "bench", Name: fmt.Sprintf("%s-%d", p.prefix, i)}
}

func (p *pitrEnv) stop() {
	if p.pg != nil {
		p.pg.Stop()
	}
	if p.my != nil {
		p.my.Stop()
	}
}

func (p *pitrEnv) name() string {
	if p.engine == "postgres" {
		return "PostgreSQL"
	}
	return "MariaDB"
}

// generate creates the load's database: pgbench's tables at pitrScale, or
// sysbench's four tables.
func (p *pitrEnv) generate() error {
	if p.engine == "postgres" {
		if _, err := p.pg.SQL("postgres", "CREATE DATABASE "+p.db); err != nil {
			return err
		}
		s := pitrScale
		_, err := p.pg.SQL(p.db, fmt.Sprintf(`
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
CREATE TABLE pgbench_tellers (tid int NOT NULL, bid int, tbalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_accounts (aid int NOT NULL, bid int, abalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_branches (bid int NOT NULL, bbalance int, filler char(88)) WITH (fillfactor = 100);
INSERT INTO pgbench_branches (bid, bbalance) SELECT i, 0 FROM generate_series(1, %d) i;
INSERT INTO pgbench_tellers (tid, bid, tbalance) SELECT i, (i - 1) / 10 + 1, 0 FROM generate_series(1, %d) i;
INSERT INTO pgbench_accounts (aid, bid, abalance, filler) SELECT i, (i - 1) / 100000 + 1, 0, '' FROM generate_series(1, %d) i;
ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid);
ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid);
ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid);
VACUUM ANALYZE;
CHECKPOINT;`, s, 10*s, 100000*s))
		if err != nil {
			return err
		}
		out, err := p.pg.SQL("postgres", "SELECT setting::bigint * CASE unit WHEN 'B' THEN 1 WHEN 'kB' THEN 1024 WHEN 'MB' THEN 1048576 ELSE 1 END FROM pg_settings WHERE name = 'wal_segment_size'")
		if err != nil {
			return err
		}
		p.segSize, err = strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		return err
	}
	rows := 6250 * pitrScale
	q := fmt.Sprintf("CREATE DATABASE %s; USE %s; CREATE TABLE bench_commits (id bigint AUTO_INCREMENT PRIMARY KEY, client int NOT NULL, at datetime(6) NOT NULL) ENGINE=InnoDB;", p.db, p.db)
	for t := 1; t <= 4; t++ {
		q += fmt.Sprintf(`
CREATE TABLE sbtest%d (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, k int NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', KEY k_%d (k)) ENGINE=InnoDB;
INSERT INTO sbtest%d (id, k, c, pad) SELECT seq, FLOOR(RAND() * %d), CONCAT(MD5(seq), MD5(seq + 1), MD5(seq + 2)), CONCAT(MD5(seq + 3), 'pad') FROM seq_1_to_%d;`,
			t, t, t, rows, rows)
	}
	_, err := p.my.SQL("", q)
	return err
}

// dbMB is the load database's size.
func (p *pitrEnv) dbMB(db string) float64 {
	var out string
	var err error
	if p.engine == "postgres" {
		out, err = p.pg.SQL("postgres", fmt.Sprintf("SELECT pg_database_size('%s')", db))
	} else {
		// The statistics first: information_schema's lengths are estimates
		// until then.
		out, err = p.my.SQL(db, "ANALYZE NO_WRITE_TO_BINLOG TABLE bench_commits, sbtest1, sbtest2, sbtest3, sbtest4; "+
			fmt.Sprintf("SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = '%s'", db))
		if lines := strings.Split(strings.TrimSpace(out), "\n"); err == nil {
			out = lines[len(lines)-1]
		}
	}
	n, perr := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err != nil || perr != nil {
		return 0
	}
	return n / 1e6
}

// archiveRun is one archiver running in this process.
type archiveRun struct {
	mu     sync.Mutex
	stored map[string]time.Time    // segment → when the archiver reported it stored
	segs   map[string]pitr.Segment // segment → its record
	cancel func()
	done   chan error
}

func (a *archiveRun) storedAt(seg string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.stored[seg]
	return t, ok
}

func (a *archiveRun) archived(s pitr.Segment) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stored[s.File], a.segs[s.File] = now, s
}

// halt stops the archiver and waits for it.
func (a *archiveRun) halt() error {
	a.cancel()
	return <-a.done
}

// startArchiver runs the engine's archiver for job at age, as `agent
// archive` configures it, and returns once it reads the log.
func (p *pitrEnv) startArchiver(job naming.Job, age time.Duration) (*archiveRun, error) {
	ctx, cancel := context.WithCancel(context.Background())
	a := &archiveRun{stored: map[string]time.Time{}, segs: map[string]pitr.Segment{}, cancel: cancel, done: make(chan error, 1)}
	started := make(chan struct{})
	var once sync.Once
	onStart := func(string) { once.Do(func() { close(started) }) }
	spool := filepath.Join(p.e.tmp, "spool-"+job.Name)
	var run func(context.Context) error
	if p.engine == "postgres" {
		w := &pitr.WALArchiver{Conn: engine.Conn{Host: "127.0.0.1", Port: p.pg.Port, User: p.pg.User, Password: p.pg.Password},
			Store: p.st, Dir: job.WALDir(), Spool: spool, MaxSegmentAge: age, Slot: pitr.SlotName(job.String()),
			Archived: a.archived, Started: onStart}
		run = w.Run
	} else {
		m := &pitr.Archiver{Source: pitr.Source{Host: "127.0.0.1", Port: p.my.Port, User: p.my.User, Password: p.my.Password},
			Store: p.st, Dir: job.BinlogDir(), Spool: spool, MaxSegmentAge: age, ReaderID: 1<<30 + 4242,
			Archived: a.archived, Started: onStart}
		run = m.Run
	}
	go func() {
		err := run(ctx)
		os.RemoveAll(spool)
		a.done <- err
	}()
	select {
	case <-started:
		return a, nil
	case err := <-a.done:
		cancel()
		return nil, fmt.Errorf("the archiver stopped before reading: %v", err)
	case <-time.After(2 * time.Minute):
		cancel()
		<-a.done
		return nil, errors.New("the archiver did not start reading within 2 minutes")
	}
}

// commit is one committed transaction of the load.
type commit struct {
	at  time.Time
	seg string // the log segment (WAL file, binary log file) holding it
	pos int64  // PostgreSQL: the insert LSN after it; MariaDB: the binary log position in seg
}

// once runs one archiver at age under load for load, then (restore) the
// restore to a time and the plain restore beside it.
func (p *pitrEnv) once(job naming.Job, age, load time.Duration, restore bool) (lagRow, []restoreRow, error) {
	fmt.Fprintf(os.Stderr, "bench: pitr %s: archiver at max segment age %s, %s of load on %d connections\n", p.engine, age, load, pitrClients)
	arch, err := p.startArchiver(job, age)
	if err != nil {
		return lagRow{}, nil, err
	}
	defer func() {
		arch.halt()
		if p.engine == "postgres" {
			p.pg.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+pitr.SlotName(job.String())+"'")
		}
	}()
	agentEnv := append(append(append([]string{}, p.agent...), p.e.s3Env()...), "CAIRN_BACKUPJOB="+job.String())
	if restore {
		fmt.Fprintf(os.Stderr, "bench: pitr %s: point-in-time base backup\n", p.engine)
		if _, err := p.e.agent(append(agentEnv, "CAIRN_DB_NAME="+p.db, "CAIRN_POINT_IN_TIME=true"), "backup"); err != nil {
			return lagRow{}, nil, err
		}
	}
	before, err := p.position()
	if err != nil {
		return lagRow{}, nil, err
	}
	wal0, err := p.walBytes()
	if err != nil {
		return lagRow{}, nil, err
	}
	start := time.Now()
	commits, err := p.load(load)
	if err != nil {
		return lagRow{}, nil, err
	}
	elapsed := time.Since(start)
	if len(commits) == 0 {
		return lagRow{}, nil, errors.New("the load committed nothing")
	}
	// Every commit's segment stored: at most an age (the next close) and
	// the upload away; generous for a loaded machine.
	last := commits[len(commits)-1]
	if err := testenv.Poll(age+3*time.Minute, 100*time.Millisecond, func() error {
		select {
		case err := <-arch.done:
			arch.done <- err
			return fmt.Errorf("the archiver stopped: %v", err)
		default:
		}
		for _, c := range commits {
			if _, ok := arch.storedAt(c.seg); !ok {
				return fmt.Errorf("segment %s (a commit at %s) not stored yet", c.seg, c.at.Format(time.RFC3339Nano))
			}
		}
		return nil
	}); err != nil {
		return lagRow{}, nil, err
	}
	row := lagRow{engine: p.name(), age: age, clients: pitrClients, commits: len(commits), load: elapsed}
	segs := map[string]bool{}
	for _, c := range commits {
		at, _ := arch.storedAt(c.seg)
		row.lags = append(row.lags, at.Sub(c.at))
		segs[c.seg] = true
	}
	slices.Sort(row.lags)
	row.segments = len(segs)
	// The log the load wrote: the binary log's bytes; PostgreSQL's WAL
	// records (pg_stat_wal, read once the load's sessions ended: not the
	// rest of a segment a switch skips, which an LSN difference counts).
	logBytes := p.logBytes(arch, before, commit{seg: last.seg, pos: last.pos})
	if p.engine == "postgres" {
		wal1, err := p.walBytes()
		if err != nil {
			return lagRow{}, nil, err
		}
		logBytes = wal1 - wal0
	}
	row.logMB = float64(logBytes) / 1e6
	fmt.Fprintf(os.Stderr, "bench: pitr %s: age %s: %d commits in %.1fs (%.0f tx/s), lag p50 %.2fs p99 %.2fs\n", p.engine, age,
		len(commits), elapsed.Seconds(), float64(len(commits))/elapsed.Seconds(), pct(row.lags, 50).Seconds(), pct(row.lags, 99).Seconds())
	if !restore {
		return row, nil, nil
	}
	rows, err := p.restores(job, agentEnv, arch, before, commits, float64(len(commits))/elapsed.Seconds(), float64(logBytes)/float64(len(commits)))
	return row, rows, err
}

// restores restores to a time near the load's end (the base and the
// archive), then a plain logical backup of the source (the same data and
// then some) by the agent without a time, and reports both.
func (p *pitrEnv) restores(job naming.Job, agentEnv []string, arch *archiveRun, before commit, commits []commit, rate, bytesPerTx float64) ([]restoreRow, error) {
	// The last whole second at least 1 s before the last commit: commits
	// follow it, so the recovery stops at a transaction after it.
	target := commits[len(commits)-1].at.Add(-time.Second).Truncate(time.Second)
	want := 0
	var at commit
	for _, c := range commits {
		if c.at.Before(target) {
			want++
			if c.seg > at.seg || c.seg == at.seg && c.pos > at.pos {
				at = c
			}
		}
	}
	pitrDB, plainDB := "pitr_at", "pitr_plain"
	fmt.Fprintf(os.Stderr, "bench: pitr %s: restore to %s\n", p.engine, target.UTC().Format(time.RFC3339))
	a := &testenv.Agent{Bin: p.e.bin, Env: append(agentEnv, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+p.e.tmp), Dir: p.e.tmp}
	r := a.Run([]string{"CAIRN_DB_NAME=" + pitrDB, "CAIRN_RECOVERY_TARGET=" + target.UTC().Format(time.RFC3339)}, "restore")
	if r.Code != 0 {
		return nil, fmt.Errorf("agent restore to %s failed: %s", target.UTC().Format(time.RFC3339), r.Stderr)
	}
	pr := restoreRow{engine: p.name(), config: "agent restore to a time ← S3 (base + log)", total: r.Elapsed, wantTxs: want, source: rate,
		logMB: float64(p.logBytes(arch, before, at)) / 1e6, dbMB: p.dbMB(p.db)}
	marks := logMarks(r.Stderr)
	if p.engine == "postgres" {
		// Unpack, then the temporary server's recovery (WAL fetched and
		// replayed to the target, promoted), then the copy into the target.
		pr.pre = marks["unpacking the base into a temporary data directory"].Sub(marks["verifying artifact"])
		pr.base = marks["recovering in a temporary server"].Sub(marks["unpacking the base into a temporary data directory"])
		pr.replay = marks["recovered"].Sub(marks["recovering in a temporary server"])
		pr.post = marks["restore finished"].Sub(marks["recovered"])
	} else {
		// The base's dump restored, then the binary log replayed.
		pr.pre = marks["restore started"].Sub(marks["verifying artifact"])
		pr.base = marks["replaying the binary log"].Sub(marks["restore started"])
		pr.replay = marks["restore finished"].Sub(marks["replaying the binary log"])
	}
	var err error
	if pr.txs, err = p.count(pitrDB); err != nil {
		return nil, err
	}
	if p.engine == "postgres" {
		// The WAL to the target: the load's WAL per transaction × the
		// transactions replayed.
		pr.logMB = bytesPerTx * float64(pr.txs) / 1e6
	}
	// The plain restore: a logical backup of the source now (the load's
	// end), restored by the agent.
	plain := naming.Job{Namespace: job.Namespace, Name: job.Name + "-plain"}
	plainEnv := append(append(append([]string{}, p.agent...), p.e.s3Env()...), "CAIRN_BACKUPJOB="+plain.String())
	fmt.Fprintf(os.Stderr, "bench: pitr %s: plain backup and restore\n", p.engine)
	if _, err := p.e.agent(append(plainEnv, "CAIRN_DB_NAME="+p.db), "backup"); err != nil {
		return nil, err
	}
	m, err := p.e.agent(append(plainEnv, "CAIRN_DB_NAME="+plainDB), "restore")
	if err != nil {
		return nil, err
	}
	pl := restoreRow{engine: p.name(), config: "agent restore (plain dump) ← S3", total: m.elapsed, wantTxs: len(commits), source: rate, dbMB: p.dbMB(p.db)}
	if pl.txs, err = p.count(plainDB); err != nil {
		return nil, err
	}
	for _, db := range []string{pitrDB, plainDB} {
		if p.engine == "postgres" {
			p.pg.SQL("postgres", "DROP DATABASE "+db)
		} else {
			p.my.SQL("", "DROP DATABASE "+db)
		}
	}
	return []restoreRow{pr, pl}, nil
}

// mysqlErr reports whether err is a MySQL error of one of the numbers n.
func mysqlErr(err error, n ...uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && slices.Contains(n, me.Number)
}

// count is the load's transactions a database holds.
func (p *pitrEnv) count(db string) (int, error) {
	var out string
	var err error
	if p.engine == "postgres" {
		out, err = p.pg.SQL(db, "SELECT count(*) FROM pgbench_history")
	} else {
		out, err = p.my.SQL(db, "SELECT COUNT(*) FROM bench_commits")
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// walBytes is the WAL records PostgreSQL wrote since its start (0 for
// MariaDB).
func (p *pitrEnv) walBytes() (int64, error) {
	if p.engine != "postgres" {
		return 0, nil
	}
	out, err := p.pg.SQL("postgres", "SELECT wal_bytes FROM pg_stat_wal")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(out), 10, 64)
}

// position is where the source's log ends now.
func (p *pitrEnv) position() (commit, error) {
	if p.engine == "postgres" {
		out, err := p.pg.SQL("postgres", "SELECT pg_walfile_name(pg_current_wal_insert_lsn()) || ' ' || pg_current_wal_insert_lsn()")
		if err != nil {
			return commit{}, err
		}
		f := strings.Fields(out)
		if len(f) != 2 {
			return commit{}, fmt.Errorf("WAL position %q", out)
		}
		lsn, err := pitr.ParseLSN(f[1])
		return commit{seg: f[0], pos: int64(lsn)}, err
	}
	out, err := p.my.SQL("", "SHOW MASTER STATUS")
	if err != nil {
		return commit{}, err
	}
	f := strings.Fields(out)
	if len(f) < 2 {
		return commit{}, fmt.Errorf("SHOW MASTER STATUS: %q", out)
	}
	pos, err := strconv.ParseInt(f[1], 10, 64)
	return commit{seg: f[0], pos: pos}, err
}

// logBytes is the log the source wrote from a to b: the LSN difference, or
// for a binary log the rest of a's file, the files between (their stored
// sizes) and b's offset.
func (p *pitrEnv) logBytes(arch *archiveRun, a, b commit) int64 {
	if p.engine == "postgres" {
		return b.pos - a.pos
	}
	if a.seg == b.seg {
		return b.pos - a.pos
	}
	arch.mu.Lock()
	defer arch.mu.Unlock()
	n := b.pos
	if s, ok := arch.segs[a.seg]; ok {
		n += s.RawSize - a.pos
	}
	for f, s := range arch.segs {
		if f > a.seg && f < b.seg {
			n += s.RawSize
		}
	}
	return n
}

// load runs the write load on pitrClients connections for d and returns
// its commits in commit order.
func (p *pitrEnv) load(d time.Duration) ([]commit, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var all []commit
	var wg sync.WaitGroup
	errs := make(chan error, pitrClients)
	for c := range pitrClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cs []commit
			var err error
			if p.engine == "postgres" {
				cs, err = p.pgClient(ctx, c)
			} else {
				cs, err = p.myClient(ctx, c)
			}
			if err != nil {
				errs <- fmt.Errorf("load client %d: %w", c, err)
			}
			mu.Lock()
			all = append(all, cs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b commit) int { return a.at.Compare(b.at) })
	return all, nil
}

// pgClient runs pgbench's TPC-B-like transaction until ctx ends.
func (p *pitrEnv) pgClient(ctx context.Context, id int) ([]commit, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s", p.pg.Port, p.pg.User, p.pg.Password, p.db))
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rnd := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	s := pitrScale
	var out []commit
	bg := context.Background() // a transaction begun is finished
	for ctx.Err() == nil {
		aid, bid, tid, delta := 1+rnd.IntN(100000*s), 1+rnd.IntN(s), 1+rnd.IntN(10*s), rnd.IntN(10001)-5000
		var bal int
		steps := []func() error{
			func() error { _, err := conn.Exec(bg, "BEGIN"); return err },
			func() error {
				_, err := conn.Exec(bg, "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2", delta, aid)
				return err
			},
			func() error {
				return conn.QueryRow(bg, "SELECT abalance FROM pgbench_accounts WHERE aid = $1", aid).Scan(&bal)
			},
			func() error {
				_, err := conn.Exec(bg, "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2", delta, tid)
				return err
			},
			func() error {
				_, err := conn.Exec(bg, "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2", delta, bid)
				return err
			},
			func() error {
				_, err := conn.Exec(bg, "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)", tid, bid, aid, delta)
				return err
			},
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return out, err
			}
		}
		// END and the log's end in one round trip: the position is read
		// after the commit.
		res, err := conn.PgConn().Exec(bg, "END; SELECT pg_walfile_name(pg_current_wal_insert_lsn()), pg_current_wal_insert_lsn()::text").ReadAll()
		at := time.Now()
		if err != nil {
			return out, err
		}
		if len(res) != 2 || len(res[1].Rows) != 1 {
			return out, fmt.Errorf("END; SELECT: %d results", len(res))
		}
		lsn, err := pitr.ParseLSN(string(res[1].Rows[0][1]))
		if err != nil {
			return out, err
		}
		out = append(out, commit{at: at, seg: string(res[1].Rows[0][0]), pos: int64(lsn)})
	}
	return out, nil
}

// myClient runs sysbench's oltp_write_only transaction (plus the commit
// log's INSERT) until ctx ends; a deadlock or lock wait timeout is rolled
// back and not counted, as sysbench does.
func (p *pitrEnv) myClient(ctx context.Context, id int) ([]commit, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = p.my.User, p.my.Password, "tcp", "127.0.0.1:"+strconv.Itoa(p.my.Port), p.db
	c.InterpolateParams = true
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	bg := context.Background()
	conn, err := db.Conn(bg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rnd := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	rows := 6250 * pitrScale
	var out []commit
	for ctx.Err() == nil {
		t := 1 + rnd.IntN(4)
		id1, id2, id3 := 1+rnd.IntN(rows), 1+rnd.IntN(rows), 1+rnd.IntN(rows)
		cval := fmt.Sprintf("%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d-%011d", rnd.Int64N(1e11), rnd.Int64N(1e11),
			rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11))
		pad := fmt.Sprintf("%011d-%011d-%011d-%011d-%011d", rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11), rnd.Int64N(1e11))
		stmts := []struct {
			q    string
			args []any
		}{
			{"BEGIN", nil},
			{fmt.Sprintf("UPDATE sbtest%d SET k = k + 1 WHERE id = ?", t), []any{id1}},
			{fmt.Sprintf("UPDATE sbtest%d SET c = ? WHERE id = ?", t), []any{cval, id2}},
			{fmt.Sprintf("DELETE FROM sbtest%d WHERE id = ?", t), []any{id3}},
			{fmt.Sprintf("INSERT INTO sbtest%d (id, k, c, pad) VALUES (?, ?, ?, ?)", t), []any{id3, rnd.IntN(rows), cval, pad}},
			{"INSERT INTO bench_commits (client, at) VALUES (?, NOW(6))", []any{id}},
			{"COMMIT", nil},
		}
		failed := false
		for _, s := range stmts {
			if _, err := conn.ExecContext(bg, s.q, s.args...); err != nil {
				if mysqlErr(err, 1213, 1205) {
					conn.ExecContext(bg, "ROLLBACK")
					failed = true
					break
				}
				return out, err
			}
		}
		if failed {
			continue
		}
		at := time.Now()
		file, pos, err := masterStatus(conn)
		if err != nil {
			return out, err
		}
		out = append(out, commit{at: at, seg: file, pos: pos})
	}
	return out, nil
}

// masterStatus is the server's binary log file and position (SHOW MASTER
// STATUS, whatever columns the version adds).
func masterStatus(conn *sql.Conn) (string, int64, error) {
	rows, err := conn.QueryContext(context.Background(), "SHOW MASTER STATUS")
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", 0, err
	}
	if !rows.Next() || len(cols) < 2 {
		return "", 0, fmt.Errorf("SHOW MASTER STATUS returned nothing: %v", rows.Err())
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", 0, err
	}
	pos, err := strconv.ParseInt(string(vals[1]), 10, 64)
	return string(vals[0]), pos, err
}

// logMarks are the times of an agent run's log messages (the first of
// each), from its text log.
func logMarks(stderr string) map[string]time.Time {
	m := map[string]time.Time{}
	for _, line := range strings.Split(stderr, "\n") {
		ts, ok := field(line, "time=")
		if !ok {
			continue
		}
		msg, ok := field(line, "msg=")
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		if _, seen := m[msg]; !seen {
			m[msg] = t
		}
	}
	return m
}

// field is the value of key in a text log line (quoted or not).
func field(line, key string) (string, bool) {
	i := strings.Index(line, key)
	if i < 0 || i > 0 && line[i-1] != ' ' {
		return "", false
	}
	v := line[i+len(key):]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u, true
		}
		return "", false
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, true
}

// pct is the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// parseAges reads -pitr-ages.
func parseAges(f string) ([]time.Duration, error) {
	var out []time.Duration
	for _, s := range strings.Split(f, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second || d > time.Hour {
			return nil, fmt.Errorf("-pitr-ages: bad age %q (1s..1h)", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// printPITR prints the point-in-time tables.
func printPITR(lags []lagRow, restores []restoreRow, wall time.Duration) {
	fmt.Println()
	fmt.Printf("Point-in-time recovery (issue 27): archive lag under a write load, and a restore to a time next to a plain restore (%.0f s)\n", wall.Seconds())
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| engine\t max segment age\t connections\t other engine loaded too\t commits\t load (s)\t write rate (tx/s)\t log written (MB/s)\t lag p50 (s)\t lag p99 (s)\t lag max (s)\t segments\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, l := range lags {
		age := l.age.String()
		if l.age == defaultSegmentAge {
			age += " (default)"
		}
		overlap := "no"
		if l.overlap {
			overlap = "yes"
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %s\t %d\t %.1f\t %.0f\t %.2f\t %.2f\t %.2f\t %.2f\t %d\t\n", l.engine, age, l.clients, overlap, l.commits,
			l.load.Seconds(), float64(l.commits)/l.load.Seconds(), l.logMB/l.load.Seconds(), pct(l.lags, 50).Seconds(),
			pct(l.lags, 99).Seconds(), l.lags[len(l.lags)-1].Seconds(), l.segments)
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Lag of a committed transaction: from the client's clock right after its COMMIT returned to the archiver's report")
	fmt.Println("that the log segment holding it is stored in S3 (object, then its record): every commit of the load counts, the")
	fmt.Println("bench waits after the load until the last one is archived. The segment is the one holding the log's end read right")
	fmt.Println("after the COMMIT on the same connection (PostgreSQL: pg_current_wal_insert_lsn() in the COMMIT's round trip; MariaDB:")
	fmt.Println("SHOW MASTER STATUS), never an earlier one. A segment is closed by the archiver every max segment age (pg_switch_wal,")
	fmt.Println("FLUSH BINARY LOGS) or, for PostgreSQL, when its 16 MiB are full. Archivers: the agent's pitr.WALArchiver")
	fmt.Println("(pg_receivewal) and pitr.Archiver (mariadb-binlog), in the bench's process as `agent archive` configures them, into")
	fmt.Println("versitygw. Load: PostgreSQL pgbench's TPC-B-like script on pgbench's tables (7 round trips a transaction, simple")
	fmt.Println("protocol); MariaDB sysbench oltp_write_only's statements on 4 tables + an INSERT into a commit log; a client per")
	fmt.Println("connection, unthrottled. Log written: the binary log's bytes; PostgreSQL's WAL records (pg_stat_wal.wal_bytes, not")
	fmt.Println("the unused rest of a switched segment). Segments: those holding the load's commits. Other engine loaded too: the")
	fmt.Println("run shared the machine with the other engine's (-pitr-overlap), which lowers its write rate, not its lag's bound.")
	fmt.Printf("The bench servers' durability settings: PostgreSQL fsync=off, synchronous_commit=off; MariaDB\n")
	fmt.Printf("innodb_flush_log_at_trx_commit=0 (as in the other cases). One run, no best-of.\n")
	if len(restores) == 0 {
		return
	}
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| engine\t restore\t total (s)\t fetch + check (s)\t base part (s)\t replay part (s)\t copy out (s)\t transactions (want)\t log replayed (MB)\t replay (tx/s)\t replay (MB/s)\t source write rate (tx/s)\t replay / source\t (fetch + check + replay) / source\t database (MB)\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, r := range restores {
		pre, base, replay, post, logMB, txps, mbps, ratio, ratio2 := "—", "—", "—", "—", "—", "—", "—", "—", "—"
		if r.replay > 0 {
			pre, base, replay = fmt.Sprintf("%.1f", r.pre.Seconds()), fmt.Sprintf("%.1f", r.base.Seconds()), fmt.Sprintf("%.1f", r.replay.Seconds())
			if r.post > 0 {
				post = fmt.Sprintf("%.1f", r.post.Seconds())
			}
			logMB = fmt.Sprintf("%.1f", r.logMB)
			tx := float64(r.txs) / r.replay.Seconds()
			txps, mbps = fmt.Sprintf("%.0f", tx), fmt.Sprintf("%.1f", r.logMB/r.replay.Seconds())
			ratio = fmt.Sprintf("%.2f×", tx/r.source)
			ratio2 = fmt.Sprintf("%.2f×", float64(r.txs)/(r.pre+r.replay).Seconds()/r.source)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %.1f\t %s\t %s\t %s\t %s\t %d (%d)\t %s\t %s\t %s\t %.0f\t %s\t %s\t %.1f\t\n", r.engine, r.config, r.total.Seconds(),
			pre, base, replay, post, r.txs, r.wantTxs, logMB, txps, mbps, r.source, ratio, ratio2, r.dbMB)
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Restore to a time: the agent restores the point-in-time base taken before the load, then replays the archived log")
	fmt.Println("to the last whole second at least 1 s before the load's last commit. Parts, from the agent's log: fetch + check =")
	fmt.Println("verifying the artifact and checking the archive's segments (MariaDB: fetched and decoded once for the source")
	fmt.Println("guard); base = PostgreSQL unpacking the physical base, MariaDB restoring the base's dump; replay = PostgreSQL the")
	fmt.Println("temporary server's recovery (WAL fetched from the store by restore_command, replayed, promoted), MariaDB")
	fmt.Println("mariadb-binlog | mariadb into the target; copy out = PostgreSQL pg_dump | pg_restore of the recovered database into")
	fmt.Println("the target. Transactions: the load's transactions the restored database holds (want: the commits that returned")
	fmt.Println("before the target; for the plain restore, all of them). Log replayed: MariaDB the binary log from the load's start")
	fmt.Println("to the target's position; PostgreSQL the load's WAL per transaction × the transactions replayed. Replay rate =")
	fmt.Println("transactions / replay part; replay / source > 1: the replay is faster than the source wrote (source: the load's")
	fmt.Println("commits / its duration, on its connections; the replay is one stream). Database: the source's size after the load.")
	fmt.Println("Plain dump: the agent's logical backup of the source after the load (the same data), restored by the agent.")
}
