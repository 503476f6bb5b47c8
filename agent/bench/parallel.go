package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

// The parallel bench (issue 26): a multi-table MariaDB database with
// secondary indexes, backed up and restored by the agent in one stream
// (today's single-file artifact) and in parts over N connections
// (CAIRN_PARALLELISM=N), side by side with mydumper/myloader -t N (Debian's
// mydumper) and the one-pass pipes.
const (
	parTables = 4
	myDumper  = "mydumper -t %d → local dir"
	// myDumperGz is mydumper with its compression (-c, gzip).
	myDumperGz = "mydumper -t %d -c (gzip) → local dir"
	myLoader   = "myloader -t %d ← local dir"
)

// mysqlParallelRow measures backups and restores of a ~mb MB multi-table
// database with threads connections.
func (e *env) mysqlParallelRow(mb, runs, threads int) (row, error) {
	db := fmt.Sprintf("par_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating MariaDB %s (~%d MB in %d tables with secondary indexes)\n", db, mb, parTables)
	dbBytes, err := generateMySQLTables(e.my, db, int64(mb)<<20)
	if err != nil {
		return row{}, err
	}
	myEnv := []string{"CAIRN_ENGINE=mysql", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.my.Port),
		"CAIRN_DB_USER=" + e.my.User, "CAIRN_DB_PASSWORD=" + e.my.Password}
	par := contractParallelism(threads)
	shellEnv := []string{"MYSQL_PWD=" + e.my.Password}
	conn := fmt.Sprintf("--host=127.0.0.1 --port=%d --user=%s --password=%s", e.my.Port, e.my.User, e.my.Password)
	dump := fmt.Sprintf("mysqldump --no-defaults --protocol=TCP --host=127.0.0.1 --port=%d --user=%s --default-character-set=utf8mb4 "+
		"--single-transaction --quick --routines --triggers --events --hex-blob --no-tablespaces -- %s", e.my.Port, e.my.User, db)
	haveMydumper := exec.Command("sh", "-c", "command -v mydumper && command -v myloader").Run() == nil
	dumpDir := filepath.Join(e.tmp, "mydumper")
	single := "agent backup → S3"
	parallel := fmt.Sprintf("agent backup → S3, parallelism %d", threads)
	dumperName := fmt.Sprintf(myDumper, threads)
	cases := []benchCase{
		{name: myZstd, run: func(int) (measurement, error) { return e.shell(shellEnv, dump+" | zstd -q > "+e.out(), e.out()) }},
		{name: resticMy, run: func(r int) (measurement, error) {
			return e.restic(shellEnv, dump, fmt.Sprintf("restic-par-%s-%d", db, r))
		}},
		{name: single, peer: myZstd, run: func(r int) (measurement, error) {
			return e.agentBackup(append(myEnv, "CAIRN_DB_NAME="+db), "s3", "fastest", "", fmt.Sprintf("bench/par-single-%d", r))
		}},
		// Issue 26: ≥ 1.3× the agent in one stream, ≥ 1.0× mydumper with
		// the same threads; peak RSS ≤ 64 MiB + the parts in flight.
		{name: parallel, peer: single, run: func(r int) (measurement, error) {
			return e.agentBackup(append(myEnv, "CAIRN_DB_NAME="+db, par), "s3", "fastest", "", fmt.Sprintf("bench/par-parts-%d", r))
		}, targets: targets{want: 1.3, also: []peerTarget{{dumperName, 1.0}, {fmt.Sprintf(myDumperGz, threads), 1.0}}, rssMiB: partsRSS(threads)}},
	}
	if haveMydumper {
		cases = append(cases, benchCase{name: dumperName, run: func(int) (measurement, error) {
			os.RemoveAll(dumpDir)
			m, err := e.shell(nil, fmt.Sprintf("mydumper %s -B %s -t %d --trx-consistency-only -o %s", conn, db, threads, dumpDir), "")
			m.outBytes = duBytes(dumpDir)
			return m, err
		}})
		// mydumper's own compression (-c: gzip), the backup a DBA keeps;
		// the agent's artifacts are compressed too.
		cases = append(cases, benchCase{name: fmt.Sprintf(myDumperGz, threads), run: func(int) (measurement, error) {
			os.RemoveAll(dumpDir)
			m, err := e.shell(nil, fmt.Sprintf("mydumper %s -B %s -t %d --trx-consistency-only -c -o %s", conn, db, threads, dumpDir), "")
			m.outBytes = duBytes(dumpDir)
			return m, err
		}})
	} else {
		fmt.Fprintln(os.Stderr, "bench: mydumper/myloader not installed (hack/agent-deps.sh): no mydumper peer")
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}

	// Restores: the same database from each format into a new one.
	file := filepath.Join(e.tmp, "par.sql.zst")
	defer os.Remove(file)
	if _, err := e.shell(shellEnv, dump+" | zstd -q > "+file, ""); err != nil {
		return row{}, err
	}
	if haveMydumper {
		os.RemoveAll(dumpDir)
		if _, err := e.shell(nil, fmt.Sprintf("mydumper %s -B %s -t %d --trx-consistency-only -o %s", conn, db, threads, dumpDir), ""); err != nil {
			return row{}, err
		}
		defer os.RemoveAll(dumpDir)
	}
	s3Env := []string{"CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT=" + e.s3.Endpoint(), "CAIRN_S3_BUCKET=" + bucket, "CAIRN_S3_PREFIX=par",
		"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey}
	jobSingle, jobParts := "bench/restore-par-single", "bench/restore-par-parts"
	for _, b := range []struct {
		job   string
		extra []string
	}{{jobSingle, nil}, {jobParts, []string{par}}} {
		env := append(append(append(append([]string{}, myEnv...), s3Env...), b.extra...), "CAIRN_DB_NAME="+db, "CAIRN_BACKUPJOB="+b.job)
		if _, err := e.agent(env, "backup"); err != nil {
			return row{}, err
		}
	}
	target := "par_restore"
	fresh := func() error {
		_, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", target, target))
		return err
	}
	restoreEnv := func(job string, extra ...string) []string {
		return append(append(append(append([]string{}, myEnv...), s3Env...), extra...), "CAIRN_DB_NAME="+target, "CAIRN_BACKUPJOB="+job)
	}
	loaderName := fmt.Sprintf(myLoader, threads)
	rSingle := "agent restore ← S3"
	rParallel := fmt.Sprintf("agent restore ← S3, parallelism %d", threads)
	rcases := []benchCase{
		{name: myRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(shellEnv, fmt.Sprintf("zstd -dc < %s | mysql --no-defaults --protocol=TCP --host=127.0.0.1 --port=%d --user=%s --default-character-set=utf8mb4 --binary-mode --database=%s",
				file, e.my.Port, e.my.User, target), "")
		}},
		{name: rSingle, peer: myRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(restoreEnv(jobSingle), "restore")
		}},
		// Issue 26: ≥ 4× today's agent restore, ≥ 1.0× myloader with the
		// same threads.
		{name: rParallel, peer: rSingle, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(restoreEnv(jobParts, par), "restore")
		}, targets: targets{want: 4, also: []peerTarget{{loaderName, 1.0}}}},
		// The same parts over one connection: what LOAD DATA and the
		// deferred keys give without parallelism.
		{name: "agent restore ← S3, parts over 1 connection", peer: rSingle, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(restoreEnv(jobParts, contractParallelism(1)), "restore")
		}},
	}
	if haveMydumper {
		rcases = append(rcases, benchCase{name: loaderName, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(nil, fmt.Sprintf("myloader %s -B %s -d %s -t %d --overwrite-tables", conn, target, dumpDir, threads), "")
		}})
	}
	rms, err := measure(dbBytes, runs, rcases)
	if err != nil {
		return row{}, err
	}
	if _, err := e.my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; DROP DATABASE %s;", target, db)); err != nil {
		return row{}, err
	}
	return row{engine: fmt.Sprintf("MariaDB %d tables", parTables), dbBytes: dbBytes, ms: append(ms, rms...)}, nil
}

func contractParallelism(n int) string { return "CAIRN_PARALLELISM=" + strconv.Itoa(n) }

// partsRSS is issue 26's memory limit for a backup in n parts at once:
// 64 MiB plus the parts in flight (an S3 part buffer each, the agent's
// default part size).
func partsRSS(n int) int64 { return 64 + int64(n)*(store.DefaultPartSize>>20) }

// generateMySQLTables creates db with parTables tables of about
// target/parTables bytes each, every one with a primary key and two
// secondary indexes, filled as generateMySQL fills events.
func generateMySQLTables(my *testenv.MariaDB, db string, target int64) (int64, error) {
	if _, err := my.SQL("", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", db, db)); err != nil {
		return 0, err
	}
	var total int64
	for i := 1; i <= parTables; i++ {
		t := fmt.Sprintf("events_%d", i)
		if _, err := my.SQL(db, fmt.Sprintf(`
CREATE TABLE %[1]s (
  id         bigint PRIMARY KEY,
  account    varchar(32) NOT NULL,
  amount     decimal(14,2),
  created_at datetime NOT NULL,
  kind       varchar(16),
  attrs      json,
  payload    varbinary(64),
  KEY %[1]s_account (account),
  KEY %[1]s_created (created_at, kind)
) ENGINE=InnoDB;`, t)); err != nil {
			return 0, err
		}
		size := func() (int64, error) {
			out, err := my.SQL("", fmt.Sprintf("ANALYZE TABLE %s.%s; SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = '%s' AND table_name = '%s'", db, t, db, t))
			if err != nil {
				return 0, err
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			return strconv.ParseInt(strings.TrimSpace(lines[len(lines)-1]), 10, 64)
		}
		var next, batch, n int64 = 1, 20_000, 0
		for n < target/parTables {
			_, err := my.SQL(db, fmt.Sprintf(`
INSERT INTO %s
SELECT seq, CONCAT('acct-', seq %% 50000), ((seq * 7919) %% 1000000) / 100.0,
  TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND,
  ELT(1 + seq %% 5, 'deposit','withdrawal','transfer','fee','refund'),
  JSON_OBJECT('ip', CONCAT('10.', seq %% 256, '.', seq * 7 %% 256, '.1'), 'ok', seq %% 3 <> 0, 'note', MD5(seq)),
  UNHEX(CONCAT(MD5(CONCAT(seq, 'a')), MD5(CONCAT(seq, 'b')), MD5(CONCAT(seq, 'c'))))
FROM seq_%d_to_%d`, t, next, next+batch-1))
			if err != nil {
				return 0, err
			}
			next += batch
			if n, err = size(); err != nil {
				return 0, err
			}
			perRow := float64(n) / float64(next-1)
			batch = min(500_000, max(1_000, int64(float64(target/parTables-n)/perRow)+1))
		}
		total += n
	}
	return total, nil
}
