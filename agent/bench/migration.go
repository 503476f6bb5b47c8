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
	"strings"

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

const (
	myDumpPipe  = "mysqldump --single-transaction | mysql (one connection)"
	myCopyOne   = "agent migrate copy (parallel 1)"
	myCopyFour  = "agent migrate copy (parallel 4)"
	myVerifyAll = "agent migrate verify (Checksum, both sides)"
)

// mysqlMigrationRow makes a MariaDB source of four tables of different
// sizes and measures `agent migrate copy` on one and on four connections
// against mysqldump piped into mysql (the agent's copy before rows went in
// parallel), each into an empty target database on the same server.
func (e *env) mysqlMigrationRow(mb, runs int) (row, error) {
	src := fmt.Sprintf("mymig_src_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating MariaDB %s (~%d MB in four tables of different sizes)\n", src, mb)
	if _, err := generateMySQL(e.my, src, int64(mb)<<20*55/100); err != nil {
		return row{}, err
	}
	if _, err := e.my.SQL(src, `
CREATE TABLE accounts_history ENGINE=InnoDB AS SELECT * FROM events WHERE id % 2 = 0;
ALTER TABLE accounts_history ADD PRIMARY KEY (id);
CREATE TABLE ledger ENGINE=InnoDB AS SELECT * FROM events WHERE id % 4 = 1;
ALTER TABLE ledger ADD PRIMARY KEY (id);
CREATE TABLE fees ENGINE=InnoDB AS SELECT * FROM events WHERE id % 37 = 3;
ALTER TABLE fees ADD PRIMARY KEY (id);`); err != nil {
		return row{}, err
	}
	out, err := e.my.SQL("", fmt.Sprintf(`ANALYZE TABLE %[1]s.events, %[1]s.accounts_history, %[1]s.ledger, %[1]s.fees;
SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = '%[1]s'`, src))
	if err != nil {
		return row{}, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	dbBytes, err := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	if err != nil {
		return row{}, fmt.Errorf("size of %s: %q", src, out)
	}
	tgt := src + "_target"
	fresh := func() error {
		_, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", tgt, tgt))
		return err
	}
	migEnv := []string{"CAIRN_ENGINE=mysql", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.my.Port),
		"CAIRN_DB_USER=" + e.my.User, "CAIRN_DB_PASSWORD=" + e.my.Password, "CAIRN_DB_NAME=" + src,
		"CAIRN_TARGET_DB_HOST=127.0.0.1", "CAIRN_TARGET_DB_PORT=" + strconv.Itoa(e.my.Port),
		"CAIRN_TARGET_DB_USER=" + e.my.User, "CAIRN_TARGET_DB_PASSWORD=" + e.my.Password, "CAIRN_TARGET_DB_NAME=" + tgt,
		"CAIRN_MIGRATION=bench/mymigration", "CAIRN_MIGRATE_MODE=Full",
		"CAIRN_TERMINATION_LOG=" + filepath.Join(e.tmp, "termination-log")}
	conn := fmt.Sprintf("--no-defaults --protocol=TCP --host=127.0.0.1 --port=%d --user=%s --default-character-set=utf8mb4", e.my.Port, e.my.User)
	cases := []benchCase{
		{name: myDumpPipe, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell([]string{"MYSQL_PWD=" + e.my.Password}, fmt.Sprintf(
				"mysqldump %s --single-transaction --quick --routines --triggers --events --hex-blob --no-tablespaces -- %s | mysql %s --binary-mode --database=%s",
				conn, src, conn, tgt), "")
		}},
		{name: myCopyOne, peer: myDumpPipe, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(migEnv, "CAIRN_MIGRATE_PARALLEL=1"), "migrate", "copy")
		}},
		{name: myCopyFour, peer: myDumpPipe, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(migEnv, "CAIRN_MIGRATE_PARALLEL=4"), "migrate", "copy")
		}},
		{name: myVerifyAll, run: func(int) (measurement, error) {
			// Runs on the target the parallel copy above just made.
			return e.agent(append(migEnv, "CAIRN_MIGRATE_VERIFY=Checksum"), "migrate", "verify")
		}},
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}
	if _, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; DROP DATABASE IF EXISTS %s;", tgt, src)); err != nil {
		return row{}, err
	}
	return row{engine: "MariaDB migration", dbBytes: dbBytes, ms: ms}, nil
}
