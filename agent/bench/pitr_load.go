package main

// The point-in-time bench's write load (pitr.go): four clients, each
// transaction's commit point read as it returns.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/pitr"
)

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
