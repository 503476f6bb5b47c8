package main

// The migration benchmark (issue 16): `agent migrate copy` (direct transfer,
// PostgreSQL, parallel per table) against `pgcopydb clone` on the same pair of
// databases on one PostgreSQL server, then the cost of `agent migrate verify`
// (row counts and checksums of both sides) on top.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"cairn.dev/agent/internal/testenv"
)

const (
	pgcopydb    = "pgcopydb clone (table-jobs 4, index-jobs 4)"
	migrateCopy = "agent migrate copy (parallel 4)"
)

// migrationRow makes a source database of several tables of different
// sizes and measures each transfer into an empty target database.
func (e *env) migrationRow(mb, runs int) (row, error) {
	src := fmt.Sprintf("mig_src_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating %s (~%d MB in four tables of different sizes)\n", src, mb)
	// events gets ~55 % of the bytes; three copies of slices of it make the
	// other tables (~28 %, ~14 %, ~1.5 %).
	if _, err := generate(e.pg, src, int64(mb)<<20*55/100); err != nil {
		return row{}, err
	}
	if _, err := e.pg.SQL(src, `
CREATE TABLE accounts_history AS SELECT * FROM events WHERE id % 2 = 0;
ALTER TABLE accounts_history ADD PRIMARY KEY (id);
CREATE TABLE ledger AS SELECT * FROM events WHERE id % 4 = 1;
ALTER TABLE ledger ADD PRIMARY KEY (id);
CREATE TABLE fees AS SELECT * FROM events WHERE id % 37 = 3;
ALTER TABLE fees ADD PRIMARY KEY (id);
VACUUM ANALYZE; CHECKPOINT;`); err != nil {
		return row{}, err
	}
	dbBytes, err := dbSize(e.pg, src)
	if err != nil {
		return row{}, err
	}
	tgt := src + "_target"
	fresh := func() error {
		if _, err := e.pg.SQL("postgres", "DROP DATABASE IF EXISTS "+tgt+" WITH (FORCE)"); err != nil {
			return err
		}
		_, err := e.pg.SQL("postgres", "CREATE DATABASE "+tgt)
		return err
	}
	migEnv := []string{"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.pg.Port),
		"CAIRN_DB_USER=" + e.pg.User, "CAIRN_DB_PASSWORD=" + e.pg.Password, "CAIRN_DB_NAME=" + src,
		"CAIRN_TARGET_DB_HOST=127.0.0.1", "CAIRN_TARGET_DB_PORT=" + strconv.Itoa(e.pg.Port),
		"CAIRN_TARGET_DB_USER=" + e.pg.User, "CAIRN_TARGET_DB_PASSWORD=" + e.pg.Password, "CAIRN_TARGET_DB_NAME=" + tgt,
		"CAIRN_MIGRATION=bench/migration", "CAIRN_MIGRATE_MODE=Full", "CAIRN_MIGRATE_PARALLEL=4",
		"CAIRN_TERMINATION_LOG=" + filepath.Join(e.tmp, "termination-log")}
	uri := func(db string) string {
		return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", e.pg.User, e.pg.Password, e.pg.Port, db)
	}
	cases := []benchCase{
		{name: pgcopydb, run: func(r int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			work := filepath.Join(e.tmp, fmt.Sprintf("pgcopydb-%d", r))
			defer os.RemoveAll(work)
			env := append(e.pg.Env(), "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"))
			return e.shell(env, fmt.Sprintf("pgcopydb clone --source %q --target %q --dir %q --table-jobs 4 --index-jobs 4 --no-owner --no-acl --notice >%q 2>&1 || { tail -20 %q; exit 1; }",
				uri(src), uri(tgt), work, work+".log", work+".log"), "")
		}},
		{name: migrateCopy, peer: pgcopydb, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(migEnv, "CAIRN_MIGRATE_VERIFY=None"), "migrate", "copy")
		}},
		{name: "agent migrate verify (Checksum, both sides)", run: func(int) (measurement, error) {
			// Runs on the target the copy above just made.
			return e.agent(append(migEnv, "CAIRN_MIGRATE_VERIFY=Checksum"), "migrate", "verify")
		}},
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}
	for _, db := range []string{tgt, src} {
		if _, err := e.pg.SQL("postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			return row{}, err
		}
	}
	return row{engine: "PostgreSQL migration", dbBytes: dbBytes, ms: ms}, nil
}

func needPgcopydb() error {
	if _, err := exec.LookPath("pgcopydb"); err != nil {
		return fmt.Errorf("pgcopydb not found (the migration bench's peer): run `make agent-deps` (installs the Debian package pgcopydb)")
	}
	return nil
}
