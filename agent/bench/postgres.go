package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/testenv"
)

func (e *env) postgresRow(mb, runs int, levels []string) (row, error) {
	db := fmt.Sprintf("bench_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating %s (~%d MB)\n", db, mb)
	dbBytes, err := generate(e.pg, db, int64(mb)<<20)
	if err != nil {
		return row{}, err
	}
	pgEnv := []string{"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.pg.Port),
		"CAIRN_DB_USER=" + e.pg.User, "CAIRN_DB_PASSWORD=" + e.pg.Password}
	cases := []benchCase{
		{name: "pg_dump -Fc | zstd", run: func(int) (measurement, error) {
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -d %s | zstd -q > %s", testenv.PGBinDir, db, e.out()), e.out())
		}},
		{name: onePass, run: func(int) (measurement, error) {
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s | zstd -q > %s", testenv.PGBinDir, db, e.out()), e.out())
		}},
		{name: onePassSync, run: func(int) (measurement, error) {
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s | zstd -q > %s && sync %s %s", testenv.PGBinDir, db, e.out(), e.out(), e.tmp), e.out())
		}},
		{name: resticPG, run: func(r int) (measurement, error) {
			return e.restic(e.pg.Env(), fmt.Sprintf("%s/pg_dump -d %s", testenv.PGBinDir, db), fmt.Sprintf("restic-%s-%d", db, r))
		}},
	}
	for _, level := range levels {
		sfx := levelSuffix(level)
		for _, kind := range []string{"pvc", "s3"} {
			peer := onePass
			if kind == "s3" {
				peer = resticPG
			}
			for _, inv := range inventories {
				plain := "agent backup → " + strings.ToUpper(kind) + sfx + inventorySuffix(inv)
				for _, enc := range encryptions() {
					cases = append(cases, benchCase{name: plain + enc.suffix, peer: enc.peer(peer, plain), run: func(r int) (measurement, error) {
						return e.agentBackup(append(append(pgEnv, enc.env...), "CAIRN_DB_NAME="+db), kind, level, inv, fmt.Sprintf("bench/%s-%d", strings.ReplaceAll(db, "_", "-"), r))
					}})
				}
			}
		}
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}

	// Restore: the same dump into a new database, by the pipe and by the agent.
	file := filepath.Join(e.tmp, "restore.dump.zst")
	defer os.Remove(file)
	if _, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s | zstd -q > %s", testenv.PGBinDir, db, file), ""); err != nil {
		return row{}, err
	}
	pvc := filepath.Join(e.tmp, "restore-pvc")
	defer os.RemoveAll(pvc)
	if err := os.MkdirAll(pvc, 0o755); err != nil {
		return row{}, err
	}
	job := "bench/restore-" + strings.ReplaceAll(db, "_", "-")
	if _, err := e.agent(append(pgEnv, "CAIRN_DB_NAME="+db, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvc, "CAIRN_BACKUPJOB="+job), "backup"); err != nil {
		return row{}, err
	}
	target := "bench_restore"
	fresh := e.pgFresh(target)
	rcases := []benchCase{
		{name: pgRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(e.pg.Env(), fmt.Sprintf("zstd -dc < %s | %s/pg_restore --single-transaction --exit-on-error --clean --if-exists --no-owner --no-privileges -d %s", file, testenv.PGBinDir, target), "")
		}},
		{name: "agent restore ← PVC", peer: pgRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(pgEnv, "CAIRN_DB_NAME="+target, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvc, "CAIRN_BACKUPJOB="+job), "restore")
		}},
	}
	rms, err := measure(dbBytes, runs, rcases)
	if err != nil {
		return row{}, err
	}
	if err := e.pgDrop(target, db); err != nil {
		return row{}, err
	}
	return row{engine: "PostgreSQL", dbBytes: dbBytes, ms: append(ms, rms...)}, nil
}

// generate creates db with about target bytes of mixed data: text,
// numeric, timestamps, JSON and bytea, some of it compressible.
func generate(pg *testenv.Postgres, db string, target int64) (int64, error) {
	if _, err := pg.SQL("postgres", fmt.Sprintf("DROP DATABASE IF EXISTS %s", db)); err != nil {
		return 0, err
	}
	if _, err := pg.SQL("postgres", fmt.Sprintf("CREATE DATABASE %s", db)); err != nil {
		return 0, err
	}
	if _, err := pg.SQL(db, `
CREATE TABLE events (
  id         bigint PRIMARY KEY,
  account    text NOT NULL,
  amount     numeric(14,2),
  created_at timestamptz NOT NULL,
  kind       text,
  attrs      jsonb,
  payload    bytea
);
CREATE INDEX events_account ON events (account);`); err != nil {
		return 0, err
	}
	// A small first batch gives the bytes per row; then batches of at most
	// 500,000 rows up to the target.
	base, err := dbSize(pg, db)
	if err != nil {
		return 0, err
	}
	var next, batch int64 = 1, 10_000
	for {
		if err := insertEvents(pg, db, next, batch); err != nil {
			return 0, err
		}
		next += batch
		size, err := dbSize(pg, db)
		if err != nil {
			return 0, err
		}
		if size >= target {
			if _, err := pg.SQL(db, "VACUUM ANALYZE events; CHECKPOINT;"); err != nil {
				return 0, err
			}
			return dbSize(pg, db)
		}
		perRow := float64(size-base) / float64(next-1)
		batch = min(500_000, max(1_000, int64(float64(target-size)/perRow)+1))
	}
}

func insertEvents(pg *testenv.Postgres, db string, from, n int64) error {
	_, err := pg.SQL(db, fmt.Sprintf(`
INSERT INTO events
SELECT i,
  'acct-' || (i %% 50000),
  ((i * 7919) %% 1000000) / 100.0,
  timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second',
  (ARRAY['deposit','withdrawal','transfer','fee','refund'])[1 + i %% 5],
  jsonb_build_object('ip', '10.' || (i %% 256) || '.' || (i * 7 %% 256) || '.1', 'ok', i %% 3 <> 0, 'note', md5(i::text)),
  decode(md5(i::text || 'a') || md5(i::text || 'b') || md5(i::text || 'c'), 'hex')
FROM generate_series(%d::bigint, %d::bigint) AS i`, from, from+n-1))
	return err
}

func dbSize(pg *testenv.Postgres, db string) (int64, error) {
	out, err := pg.SQL("postgres", fmt.Sprintf("SELECT pg_database_size('%s')", db))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(out), 10, 64)
}
