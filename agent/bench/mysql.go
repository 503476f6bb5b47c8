package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/testenv"
)

func (e *env) mysqlRow(mb, runs int, levels []string) (row, error) {
	db := fmt.Sprintf("bench_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating MariaDB %s (~%d MB)\n", db, mb)
	dbBytes, err := generateMySQL(e.my, db, int64(mb)<<20)
	if err != nil {
		return row{}, err
	}
	myEnv := []string{"CAIRN_ENGINE=mysql", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.my.Port),
		"CAIRN_DB_USER=" + e.my.User, "CAIRN_DB_PASSWORD=" + e.my.Password}
	shellEnv := []string{"MYSQL_PWD=" + e.my.Password}
	// The agent's own mysqldump flags (engine.MySQL).
	dump := fmt.Sprintf("mysqldump --no-defaults --protocol=TCP --host=127.0.0.1 --port=%d --user=%s --default-character-set=utf8mb4 "+
		"--single-transaction --quick --routines --triggers --events --hex-blob --no-tablespaces -- %s", e.my.Port, e.my.User, db)
	cases := []benchCase{
		{name: myZstd, run: func(int) (measurement, error) {
			return e.shell(shellEnv, dump+" | zstd -q > "+e.out(), e.out())
		}},
		{name: myZstdSync, run: func(int) (measurement, error) {
			return e.shell(shellEnv, dump+" | zstd -q > "+e.out()+" && sync "+e.out()+" "+e.tmp, e.out())
		}},
		{name: resticMy, run: func(r int) (measurement, error) {
			return e.restic(shellEnv, dump, fmt.Sprintf("restic-my-%s-%d", db, r))
		}},
	}
	for _, level := range levels {
		for _, kind := range []string{"pvc", "s3"} {
			peer := myZstd
			if kind == "s3" {
				peer = resticMy
			}
			for _, inv := range inventories {
				plain := "agent backup → " + strings.ToUpper(kind) + levelSuffix(level) + inventorySuffix(inv)
				for _, enc := range encryptions() {
					cases = append(cases, benchCase{name: plain + enc.suffix, peer: enc.peer(peer, plain), run: func(r int) (measurement, error) {
						return e.agentBackup(append(append(myEnv, enc.env...), "CAIRN_DB_NAME="+db), kind, level, inv, fmt.Sprintf("bench/my-%s-%d", strings.ReplaceAll(db, "_", "-"), r))
					}})
				}
			}
		}
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}
	file := filepath.Join(e.tmp, "restore.sql.zst")
	defer os.Remove(file)
	if _, err := e.shell(shellEnv, dump+" | zstd -q > "+file, ""); err != nil {
		return row{}, err
	}
	pvc := filepath.Join(e.tmp, "restore-pvc-my")
	defer os.RemoveAll(pvc)
	if err := os.MkdirAll(pvc, 0o755); err != nil {
		return row{}, err
	}
	job := "bench/restore-my-" + strings.ReplaceAll(db, "_", "-")
	if _, err := e.agent(append(myEnv, "CAIRN_DB_NAME="+db, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvc, "CAIRN_BACKUPJOB="+job), "backup"); err != nil {
		return row{}, err
	}
	target := "bench_restore"
	fresh := func() error {
		_, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", target, target))
		return err
	}
	rcases := []benchCase{
		{name: myRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(shellEnv, fmt.Sprintf("zstd -dc < %s | mysql --no-defaults --protocol=TCP --host=127.0.0.1 --port=%d --user=%s --default-character-set=utf8mb4 --binary-mode --database=%s",
				file, e.my.Port, e.my.User, target), "")
		}},
		{name: "agent restore ← PVC", peer: myRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(myEnv, "CAIRN_DB_NAME="+target, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvc, "CAIRN_BACKUPJOB="+job), "restore")
		}},
	}
	rms, err := measure(dbBytes, runs, rcases)
	if err != nil {
		return row{}, err
	}
	if _, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; DROP DATABASE %s;", target, db)); err != nil {
		return row{}, err
	}
	return row{engine: "MariaDB", dbBytes: dbBytes, ms: append(ms, rms...)}, nil
}

// generateMySQL creates db in MariaDB with about target bytes of the same
// mixed data as generate.
func generateMySQL(my *testenv.MariaDB, db string, target int64) (int64, error) {
	if _, err := my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", db, db)); err != nil {
		return 0, err
	}
	if _, err := my.SQL(db, `
CREATE TABLE events (
  id         bigint PRIMARY KEY,
  account    varchar(32) NOT NULL,
  amount     decimal(14,2),
  created_at datetime NOT NULL,
  kind       varchar(16),
  attrs      json,
  payload    varbinary(64),
  KEY events_account (account)
) ENGINE=InnoDB;`); err != nil {
		return 0, err
	}
	size := func() (int64, error) {
		out, err := my.SQL("", fmt.Sprintf("ANALYZE TABLE %s.events; SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = '%s' AND table_name = 'events'", db, db))
		if err != nil {
			return 0, err
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
	}
	var next, batch int64 = 1, 20_000
	for {
		_, err := my.SQL(db, fmt.Sprintf(`
INSERT INTO events
SELECT seq, CONCAT('acct-', seq %% 50000), ((seq * 7919) %% 1000000) / 100.0,
  TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND,
  ELT(1 + seq %% 5, 'deposit','withdrawal','transfer','fee','refund'),
  JSON_OBJECT('ip', CONCAT('10.', seq %% 256, '.', seq * 7 %% 256, '.1'), 'ok', seq %% 3 <> 0, 'note', MD5(seq)),
  UNHEX(CONCAT(MD5(CONCAT(seq, 'a')), MD5(CONCAT(seq, 'b')), MD5(CONCAT(seq, 'c'))))
FROM seq_%d_to_%d`, next, next+batch-1))
		if err != nil {
			return 0, err
		}
		next += batch
		n, err := size()
		if err != nil {
			return 0, err
		}
		if n >= target {
			return n, nil
		}
		perRow := float64(n) / float64(next-1)
		batch = min(500_000, max(1_000, int64(float64(target-n)/perRow)+1))
	}
}
