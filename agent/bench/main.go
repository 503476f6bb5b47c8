// Command bench measures the agent's backup and restore throughput, CPU,
// stored bytes and peak memory side by side with its peers on the same data
// in the same run: the one-pass pipe `pg_dump -Fc -Z0 | zstd > file`, K8up's
// application-aware path `pg_dump | restic backup --stdin` into the same
// versitygw bucket, `zstd -d | pg_restore` for restores, and the same with
// mysqldump/mysql for MariaDB. It is a benchmark, not a test: it prints
// figures and asserts nothing. Run it with `make bench-agent`.
//
// It starts a private PostgreSQL 15 and a versitygw S3 server in temporary
// folders (as the data-path tests do), generates databases of about the
// requested sizes there, and removes everything when done.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"cairn.dev/agent/internal/testenv"
)

const (
	password  = "bench-password"
	accessKey = "bench-access"
	secretKey = "bench-secret-key"
	bucket    = "bench"
)

type measurement struct {
	config string
	// peer is the configuration this one is compared with ("" for a peer).
	peer     string
	elapsed  time.Duration
	cpu      time.Duration
	outBytes int64
	rssKiB   int64
}

// A bench case is one configuration, run `runs` times interleaved with the
// others of its size; the fastest run counts.
type benchCase struct {
	name, peer string
	run        func(r int) (measurement, error)
}

// The encoder comparison's flags (see encoders).
var (
	encodersMB       int
	encodersProfiles string
	// inventory, when set, is the agent backups' CAIRN_INVENTORY.
	// A case per value: "" is the agent's default (RowCount).
	inventories []string
	// casesRE, when set, keeps only the configurations it matches.
	casesRE *regexp.Regexp
	// The parallel bench's sizes (MB) and connections (parallel.go).
	mysqlParallelSizes string
	parallelThreads    int
)

type row struct {
	engine  string
	dbBytes int64
	ms      []measurement
}

func main() {
	sizesFlag := flag.String("sizes", "100,1000", "PostgreSQL database sizes to generate, in MB (comma-separated; empty: none)")
	mysqlSizes := flag.String("mysql-sizes", "100,1000", "MariaDB database sizes to generate, in MB (comma-separated; empty: none)")
	runs := flag.Int("runs", 2, "runs of each configuration; the fastest counts")
	levels := flag.String("compression", "fastest", "agent zstd levels to measure (comma-separated: fastest, default, better; the agent's default is fastest)")
	migrationSizes := flag.String("migration-sizes", "", "PostgreSQL source database sizes for the migration bench (agent migrate copy vs pgcopydb clone), in MB (comma-separated; empty: none)")
	flag.IntVar(&encodersMB, "encoders-mb", 0, "also compare zstd encoders (the CLI at -3 and -1, Go at several levels, concurrencies and windows) on one pg_dump -Fc -Z0 of a database of this many MB (0: no)")
	flag.StringVar(&encodersProfiles, "encoders-cpuprofile-dir", "", "with -encoders-mb: write a CPU profile of each Go encoder configuration into this folder")
	inventoryFlag := flag.String("inventory", "", "CAIRN_INVENTORY of the agent's backups, comma-separated for a case each (Checksum, RowCount, None; empty: the agent's default, RowCount)")
	casesFlag := flag.String("cases", "", "measure only the configurations whose name matches this regular expression (e.g. 'Z0|PVC'); the restore's preparation still runs")
	mysqlMigrationSizes := flag.String("mysql-migration-sizes", "", "MariaDB source database sizes for the migration bench (agent migrate copy on 1 and 4 connections vs mysqldump | mysql), in MB (comma-separated; empty: none)")
	flag.StringVar(&mysqlParallelSizes, "mysql-parallel-sizes", "", "MariaDB multi-table database sizes for the parallel bench (agent in one stream and in parts vs mydumper/myloader), in MB (comma-separated; empty: none)")
	flag.IntVar(&parallelThreads, "threads", 2, "with -mysql-parallel-sizes: the agent's CAIRN_PARALLELISM and mydumper/myloader -t")
	flag.BoolVar(&encrypt, "encryption", true, "also measure every agent backup encrypted with age to two X25519 recipients, side by side with the same backup unencrypted (its peer)")
	flag.Parse()
	inventories = strings.Split(*inventoryFlag, ",")
	if *casesFlag != "" {
		var err error
		if casesRE, err = regexp.Compile(*casesFlag); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cases:", err)
			os.Exit(2)
		}
	}
	if err := run(*sizesFlag, *mysqlSizes, *migrationSizes, *mysqlMigrationSizes, *runs, strings.Split(*levels, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseSizes(f string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(f, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// env is what every case needs.
type env struct {
	bin string
	tmp string
	pg  *testenv.Postgres
	my  *testenv.MariaDB
	s3  *testenv.S3
}

func run(sizesFlag, mysqlFlag, migrationFlag, mysqlMigrationFlag string, runs int, levels []string) error {
	sizes, err := parseSizes(sizesFlag)
	if err != nil {
		return err
	}
	migrationSizes, err := parseSizes(migrationFlag)
	if err != nil {
		return err
	}
	if len(migrationSizes) > 0 {
		if err := needPgcopydb(); err != nil {
			return err
		}
	}
	mysqlSizes, err := parseSizes(mysqlFlag)
	if err != nil {
		return err
	}
	parSizes, err := parseSizes(mysqlParallelSizes)
	if err != nil {
		return err
	}
	mysqlMigrationSizes, err := parseSizes(mysqlMigrationFlag)
	if err != nil {
		return err
	}
	for _, tool := range []string{"zstd", "bash", "restic"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %s", tool, testenv.Hint)
		}
	}
	tmp, err := os.MkdirTemp("", "cairn-agent-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{tmp: tmp}

	fmt.Fprintln(os.Stderr, "bench: building the agent")
	if e.bin, err = testenv.BuildAgent(tmp); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: starting PostgreSQL 15, versitygw and (for -mysql-sizes) MariaDB")
	if e.pg, err = testenv.StartPostgres(password); err != nil {
		return err
	}
	defer e.pg.Stop()
	if len(mysqlSizes) > 0 || len(mysqlMigrationSizes) > 0 || len(parSizes) > 0 {
		if e.my, err = testenv.StartMariaDB("bench", password); err != nil {
			return err
		}
		defer e.my.Stop()
	}
	if e.s3, err = testenv.StartS3("", accessKey, secretKey); err != nil {
		return err
	}
	defer e.s3.Stop()
	if err := e.s3.MakeBucket(bucket); err != nil {
		return err
	}

	if encodersMB > 0 {
		if err := e.encoders(encodersMB, runs, encodersProfiles); err != nil {
			return err
		}
	}
	var rows []row
	for _, mb := range sizes {
		r, err := e.postgresRow(mb, runs, levels)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for _, mb := range mysqlSizes {
		r, err := e.mysqlRow(mb, runs, levels)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for _, mb := range parSizes {
		r, err := e.mysqlParallelRow(mb, runs, parallelThreads)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for _, mb := range migrationSizes {
		r, err := e.migrationRow(mb, runs)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for _, mb := range mysqlMigrationSizes {
		r, err := e.mysqlMigrationRow(mb, runs)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}

	pgVersion, _ := e.pg.SQL("postgres", "SHOW server_version")
	myVersion := ""
	if e.my != nil {
		myVersion, _ = e.my.SQL("", "SELECT VERSION()")
	}
	fmt.Printf("Agent benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("Machine: %s, %d cores, %s; load average %s; %s; PostgreSQL %s; MariaDB %s; %s; %s; best of %d runs\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), loadAvg(), runtime.Version(), pgVersion, myVersion,
		toolVersion("zstd", "--version"), toolVersion("restic", "version"), runs)
	if len(migrationSizes) > 0 {
		fmt.Printf("Migration peer: %s\n\n", toolVersion("pgcopydb", "--version"))
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| database\t pipeline\t time (s)\t throughput (MB/s)\t vs peer\t peer\t CPU s\t output (MB)\t agent peak RSS (MiB)\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, r := range rows {
		by := map[string]measurement{}
		for _, m := range r.ms {
			by[m.config] = m
		}
		for _, m := range r.ms {
			ratio, peer := "—", "—"
			if p, ok := by[m.peer]; ok {
				ratio = fmt.Sprintf("%.2f×", p.elapsed.Seconds()/m.elapsed.Seconds())
				peer = strings.ReplaceAll(m.peer, "|", "\\|")
			}
			out := "—"
			if m.outBytes > 0 {
				out = fmt.Sprintf("%.1f", float64(m.outBytes)/1e6)
			}
			fmt.Fprintf(tw, "| %s %.0f MB\t %s\t %.1f\t %.1f\t %s\t %s\t %.1f\t %s\t %s\t\n", r.engine, float64(r.dbBytes)/1e6,
				strings.ReplaceAll(m.config, "|", "\\|"), m.elapsed.Seconds(), mbps(r.dbBytes, m.elapsed), ratio, peer,
				m.cpu.Seconds(), out, rss(m.rssKiB))
		}
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Throughput is the database's size (pg_database_size; MariaDB: data + index length) divided by wall time;")
	fmt.Println("vs peer = peer's time / this time. CPU s: user + system of the whole pipeline (tools included).")
	fmt.Println("Targets: agent backup ≥ 1.0× `pg_dump -Fc -Z0 | zstd`; agent → S3 ≥ 1.2× `dump | restic backup --stdin` with output no larger;")
	fmt.Println("agent restore ≥ 0.95× `zstd -d | pg_restore` (or mysql); agent migrate copy ≥ 1.0× `pgcopydb clone` (verification off); agent peak RSS ≤ 64 MiB.")
	for _, r := range rows {
		by := map[string]measurement{}
		for _, m := range r.ms {
			by[m.config] = m
		}
		for _, m := range r.ms {
			if !strings.HasPrefix(m.config, "agent") {
				continue
			}
			p, ok := by[m.peer]
			if !ok {
				continue
			}
			ratio := p.elapsed.Seconds() / m.elapsed.Seconds()
			want := 1.0
			switch {
			case strings.Contains(m.peer, "restic"):
				want = 1.2
			case strings.HasPrefix(m.config, "agent restore"):
				want = 0.95
			}
			line := fmt.Sprintf("  %s %.0f MB, %s: %.2f× %s (%s)", r.engine, float64(r.dbBytes)/1e6, m.config, ratio, m.peer, verdict(ratio >= want))
			if ps, ok := by[m.peer+" + sync"]; ok {
				line += fmt.Sprintf(", %.2f× %s (durable, like the agent's PVC store)", ps.elapsed.Seconds()/m.elapsed.Seconds(), ps.config)
			}
			if strings.Contains(m.peer, "restic") {
				line += fmt.Sprintf(", stored %.1f vs %.1f MB (%s)", float64(m.outBytes)/1e6, float64(p.outBytes)/1e6, verdict(m.outBytes <= p.outBytes))
			}
			line += fmt.Sprintf(", peak RSS %s MiB (%s)", rss(m.rssKiB), verdict(m.rssKiB > 0 && m.rssKiB <= 64<<10))
			fmt.Println(line)
		}
	}
	return nil
}

// measure runs cases interleaved, runs times, and keeps each one's fastest.
func measure(dbBytes int64, runs int, cases []benchCase) ([]measurement, error) {
	if casesRE != nil {
		var kept []benchCase
		for _, c := range cases {
			if casesRE.MatchString(c.name) {
				kept = append(kept, c)
			}
		}
		cases = kept
	}
	best := map[string]measurement{}
	for r := 0; r < runs; r++ {
		for _, c := range cases {
			m, err := c.run(r)
			if err != nil {
				return nil, err
			}
			m.config, m.peer = c.name, c.peer
			fmt.Fprintf(os.Stderr, "bench: %-40s %6.1fs  %7.1f MB/s  cpu %5.1fs  rss %s\n", m.config, m.elapsed.Seconds(),
				mbps(dbBytes, m.elapsed), m.cpu.Seconds(), rss(m.rssKiB))
			if b, ok := best[c.name]; !ok || m.elapsed < b.elapsed {
				best[c.name] = m
			}
		}
	}
	var ms []measurement
	for _, c := range cases {
		ms = append(ms, best[c.name])
	}
	return ms, nil
}

const (
	onePass = "pg_dump -Fc -Z0 | zstd"
	// The pipes followed by an fsync of the file and its folder (`sync
	// FILE DIR`), as the agent's PVC store does before it reports success:
	// the durable comparison, printed beside the peer.
	onePassSync = "pg_dump -Fc -Z0 | zstd + sync"
	myZstdSync  = "mysqldump | zstd + sync"
	resticPG    = "pg_dump | restic backup --stdin → S3"
	pgRestore   = "zstd -d | pg_restore"
	myZstd      = "mysqldump | zstd"
	resticMy    = "mysqldump | restic backup --stdin → S3"
	myRestore   = "zstd -d | mysql"
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
	fresh := func() error {
		_, err := e.pg.SQL("postgres", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", target, target))
		return err
	}
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
	for _, q := range []string{"DROP DATABASE IF EXISTS " + target, "DROP DATABASE " + db} {
		if _, err := e.pg.SQL("postgres", q); err != nil {
			return row{}, err
		}
	}
	return row{engine: "PostgreSQL", dbBytes: dbBytes, ms: append(ms, rms...)}, nil
}

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

// levelSuffix names a zstd level in a configuration's name; the agent's
// default level (fastest) is not named.
func levelSuffix(level string) string {
	if level == "fastest" || level == "" {
		return ""
	}
	return " (zstd " + level + ")"
}

// inventorySuffix names a non-default CAIRN_INVENTORY.
func inventorySuffix(inv string) string {
	if inv == "" {
		return ""
	}
	return ", inventory " + inv
}

func (e *env) out() string { return filepath.Join(e.tmp, "baseline.out") }

// shell times a bash pipeline; the size of out (if set) is its output,
// removed afterwards.
func (e *env) shell(extraEnv []string, script, out string) (measurement, error) {
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), extraEnv...)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return measurement{}, fmt.Errorf("%s: %w: %s", script, err, b)
	}
	m := measurement{elapsed: time.Since(start), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if out != "" {
		fi, err := os.Stat(out)
		if err != nil {
			return measurement{}, err
		}
		m.outBytes = fi.Size()
		os.Remove(out)
	}
	return m, nil
}

// restic times `dump | restic backup --stdin` into a new repository under
// prefix in the bench bucket (restic init is not timed: K8up's repository
// exists before a backup) and reports the bytes the repository stores.
func (e *env) restic(extraEnv []string, dump, prefix string) (measurement, error) {
	renv := append(append([]string{}, extraEnv...),
		"RESTIC_REPOSITORY=s3:http://"+e.s3.Endpoint()+"/"+bucket+"/"+prefix,
		"RESTIC_PASSWORD=bench-restic", "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey,
		"AWS_DEFAULT_REGION=us-east-1", "RESTIC_CACHE_DIR="+filepath.Join(e.tmp, "restic-cache"))
	defer os.RemoveAll(filepath.Join(e.tmp, "restic-cache"))
	if _, err := e.shell(renv, "restic init --repository-version 2 -q", ""); err != nil {
		return measurement{}, err
	}
	m, err := e.shell(renv, dump+" | restic backup -q --host bench --stdin --stdin-filename dump.sql", "")
	if err != nil {
		return measurement{}, err
	}
	dir := filepath.Join(e.s3.Root, bucket, prefix)
	m.outBytes = duBytes(dir)
	return m, os.RemoveAll(dir)
}

func duBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// agent runs one agent command to completion.
func (e *env) agent(env []string, cmd ...string) (measurement, error) {
	env = append(env, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+e.tmp)
	a := &testenv.Agent{Bin: e.bin, Env: env, Dir: e.tmp}
	r := a.Run(nil, cmd...)
	if r.Code != 0 {
		return measurement{}, fmt.Errorf("agent %s failed: %s", cmd, r.Stderr)
	}
	return measurement{elapsed: r.Elapsed, cpu: r.CPU, rssKiB: r.PeakRSSKiB}, nil
}

func (e *env) agentBackup(env []string, kind, level, inv, job string) (measurement, error) {
	if inv != "" {
		env = append(env, "CAIRN_INVENTORY="+inv)
	}
	env = append(env, "CAIRN_BACKUPJOB="+job, "CAIRN_COMPRESSION="+level, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+e.tmp)
	pvcDir := filepath.Join(e.tmp, "pvc")
	switch kind {
	case "pvc":
		if err := os.MkdirAll(pvcDir, 0o755); err != nil {
			return measurement{}, err
		}
		defer os.RemoveAll(pvcDir)
		env = append(env, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvcDir)
	case "s3":
		env = append(env, "CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT="+e.s3.Endpoint(), "CAIRN_S3_BUCKET="+bucket,
			"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey)
	}
	a := &testenv.Agent{Bin: e.bin, Env: env, Dir: e.tmp}
	r := a.Run(nil, "backup")
	if r.Code != 0 {
		return measurement{}, fmt.Errorf("agent backup to %s failed: %s", kind, r.Stderr)
	}
	res, err := r.Result()
	if err != nil {
		return measurement{}, err
	}
	m := measurement{elapsed: r.Elapsed, cpu: r.CPU, outBytes: res.Size + res.PartsSize, rssKiB: r.PeakRSSKiB}
	if kind == "s3" {
		// What the bucket holds for the job (artifact and manifest), then
		// free the space with the agent itself.
		if n := duBytes(filepath.Join(e.s3.Root, bucket, "cairn")); n > 0 {
			m.outBytes = n
		}
		if d := a.Run(nil, "delete"); d.Code != 0 {
			return measurement{}, fmt.Errorf("agent delete: %s", d.Stderr)
		}
	}
	return m, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func toolVersion(tool, arg string) string {
	out, err := exec.Command(tool, arg).Output()
	if err != nil {
		return tool + " ?"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func mbps(b int64, d time.Duration) float64 { return float64(b) / 1e6 / d.Seconds() }

func rss(kib int64) string {
	if kib <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", float64(kib)/1024)
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

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? memory"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return fmt.Sprintf("%.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return "? memory"
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
