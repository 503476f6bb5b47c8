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
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
