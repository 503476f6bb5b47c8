// Command bench measures the agent's backup and restore throughput, CPU,
// stored bytes and peak memory side by side with its peers on the same data
// in the same run: the one-pass pipe `pg_dump -Fc -Z0 | zstd > file`, K8up's
// application-aware path `pg_dump | restic backup --stdin` into the same
// versitygw bucket, `zstd -d | pg_restore` for restores, and the same with
// mysqldump/mysql for MariaDB; and (-pitr, pitr.go) point-in-time recovery:
// the archivers' lag under a write load and a restore to a time next to a
// plain restore. It is a benchmark, not a test: it prints
// figures and asserts nothing. Run it with `make bench-agent`.
//
// It starts a private PostgreSQL 15 and a versitygw S3 server in temporary
// folders (as the data-path tests do), generates databases of about the
// requested sizes there, and removes everything when done.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
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
	// busy is the CPU time the whole machine spent while the timed command ran
	// (every process: the database and S3 servers too; /proc/stat).
	busy time.Duration
	targets
}

// targets are what a configuration must show: want, its ratio to peer (0:
// the report's defaults); also, more peers with their ratios; rssMiB, its
// peak RSS (0: 64 MiB).
type targets struct {
	want   float64
	also   []peerTarget
	rssMiB int64
}

type peerTarget struct {
	peer string
	want float64
}

// A bench case is one configuration, run `runs` times interleaved with the
// others of its size; the fastest run counts.
type benchCase struct {
	name, peer string
	run        func(r int) (measurement, error)
	targets
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
	pgParallelSizes    string
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
	flag.StringVar(&pgParallelSizes, "pg-parallel-sizes", "", "PostgreSQL multi-table database sizes for the parallel bench (the agent vs pg_dump -Fd -j and pg_restore -j from local files), in MB (comma-separated; empty: none)")
	flag.IntVar(&parallelThreads, "threads", 2, "with -mysql-parallel-sizes / -pg-parallel-sizes: the agent's CAIRN_PARALLELISM and the peers' threads (mydumper/myloader -t, pg_dump/pg_restore -j)")
	flag.BoolVar(&encrypt, "encryption", true, "also measure every agent backup encrypted with age to two X25519 recipients, side by side with the same backup unencrypted (its peer)")
	pitrFlags()
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
	// pitrMyVersion: the point-in-time bench's MariaDB's version.
	pitrMyVersion string
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
	pgParSizes, err := parseSizes(pgParallelSizes)
	if err != nil {
		return err
	}
	mysqlMigrationSizes, err := parseSizes(mysqlMigrationFlag)
	if err != nil {
		return err
	}
	var pitrEngineList []string
	for _, s := range strings.Split(pitrEngines, ",") {
		if s = strings.TrimSpace(s); s != "" {
			pitrEngineList = append(pitrEngineList, s)
		}
	}
	ages, err := parseAges(pitrAges)
	if err != nil {
		return err
	}
	if len(pitrEngineList) > 0 && len(ages) == 0 {
		return fmt.Errorf("-pitr %s with no -pitr-ages", pitrEngines)
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
	for _, mb := range pgParSizes {
		r, err := e.pgParallelRow(mb, runs, parallelThreads)
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

	var lags []lagRow
	var restores []restoreRow
	var pitrWall time.Duration
	if len(pitrEngineList) > 0 {
		start := time.Now()
		if lags, restores, err = e.pitrBench(pitrEngineList, ages); err != nil {
			return err
		}
		pitrWall = time.Since(start)
	}

	pgVersion, _ := e.pg.SQL("postgres", "SHOW server_version")
	myVersion := e.pitrMyVersion
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
	if len(rows) == 0 {
		if len(lags) > 0 {
			printPITR(lags, restores, pitrWall)
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| database\t pipeline\t time (s)\t throughput (MB/s)\t vs peer\t peer\t CPU s\t machine CPU s (busy)\t output (MB)\t agent peak RSS (MiB)\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
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
			fmt.Fprintf(tw, "| %s %.0f MB\t %s\t %.1f\t %.1f\t %s\t %s\t %.1f\t %s\t %s\t %s\t\n", r.engine, float64(r.dbBytes)/1e6,
				strings.ReplaceAll(m.config, "|", "\\|"), m.elapsed.Seconds(), mbps(r.dbBytes, m.elapsed), ratio, peer,
				m.cpu.Seconds(), busyPct(m), out, rss(m.rssKiB))
		}
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Throughput is the database's size (pg_database_size; MariaDB: data + index length) divided by wall time;")
	fmt.Println("vs peer = peer's time / this time. CPU s: user + system of the whole pipeline (tools included).")
	fmt.Println("Targets: agent backup ≥ 1.0× `pg_dump -Fc -Z0 | zstd`; agent → S3 ≥ 1.2× `dump | restic backup --stdin` with output no larger;")
	fmt.Println("agent restore ≥ 0.95× `zstd -d | pg_restore` (or mysql); agent migrate copy ≥ 1.0× `pgcopydb clone` (verification off); agent peak RSS ≤ 64 MiB;")
	fmt.Println("the parallel rows: issue 26's (each line names its own). Machine CPU s: every process's CPU while the timed command ran (/proc/stat),")
	fmt.Println("busy = that / (time × cores): near 100 % the machine is the bound, and only less work makes the run faster.")
	printTargets(rows)
	if len(lags) > 0 {
		printPITR(lags, restores, pitrWall)
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
			m.config, m.peer, m.targets = c.name, c.peer, c.targets
			fmt.Fprintf(os.Stderr, "bench: %-40s %6.1fs  %7.1f MB/s  cpu %5.1fs  machine %s  rss %s\n", m.config, m.elapsed.Seconds(),
				mbps(dbBytes, m.elapsed), m.cpu.Seconds(), busyPct(m), rss(m.rssKiB))
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
