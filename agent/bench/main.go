// Command bench measures the agent's backup throughput and peak memory
// against the plain `pg_dump -Fc | zstd > file` pipeline on the same data in
// the same run. It is a benchmark, not a test: it prints figures and
// asserts nothing. Run it with `make bench-agent`.
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

// inventories are the CAIRN_INVENTORY settings measured; withS3 adds the
// S3 store.
var (
	inventories = []string{"Checksum"}
	withS3      = true
)

type measurement struct {
	config   string
	elapsed  time.Duration
	outBytes int64
	rssKiB   int64
}

func main() {
	sizesFlag := flag.String("sizes", "100,1000", "database sizes to generate, in MB (comma-separated)")
	runs := flag.Int("runs", 2, "runs of each configuration; the fastest counts")
	levels := flag.String("compression", "default", "agent zstd levels to measure (comma-separated: fastest, default, better)")
	noS3 := flag.Bool("no-s3", false, "measure the PVC store only (no versitygw needed)")
	invs := flag.String("inventory", "Checksum,None", "agent CAIRN_INVENTORY settings to measure (comma-separated: Checksum, RowCount, None); the first also runs against S3")
	flag.Parse()
	inventories = strings.Split(*invs, ",")
	withS3 = !*noS3
	if err := run(*sizesFlag, *runs, strings.Split(*levels, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(sizesFlag string, runs int, levels []string) error {
	var sizes []int
	for _, s := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad size %q", s)
		}
		sizes = append(sizes, n)
	}
	for _, tool := range []string{"zstd", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %s", tool, testenv.Hint)
		}
	}
	tmp, err := os.MkdirTemp("", "cairn-agent-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	fmt.Fprintln(os.Stderr, "bench: building the agent")
	bin, err := testenv.BuildAgent(tmp)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: starting PostgreSQL 15 and versitygw")
	pg, err := testenv.StartPostgres(password)
	if err != nil {
		return err
	}
	defer pg.Stop()
	var s3 *testenv.S3
	if withS3 {
		if s3, err = testenv.StartS3("", accessKey, secretKey); err != nil {
			return err
		}
		defer s3.Stop()
		if err := s3.MakeBucket(bucket); err != nil {
			return err
		}
	}

	type row struct {
		dbBytes int64
		ms      []measurement
	}
	var rows []row
	for _, mb := range sizes {
		db := fmt.Sprintf("bench_%dmb", mb)
		fmt.Fprintf(os.Stderr, "bench: generating %s (~%d MB)\n", db, mb)
		dbBytes, err := generate(pg, db, int64(mb)<<20)
		if err != nil {
			return err
		}
		best := map[string]measurement{}
		var order []string
		keep := func(m measurement) {
			if b, ok := best[m.config]; !ok || m.elapsed < b.elapsed {
				if !ok {
					order = append(order, m.config)
				}
				best[m.config] = m
			}
			fmt.Fprintf(os.Stderr, "bench: %-36s %6.1fs  %7.1f MB/s  rss %s\n", m.config, m.elapsed.Seconds(),
				mbps(dbBytes, m.elapsed), rss(m.rssKiB))
		}
		for r := 0; r < runs; r++ {
			for _, z0 := range []bool{false, true} {
				m, err := baseline(pg, db, tmp, z0)
				if err != nil {
					return err
				}
				keep(m)
			}
			for _, level := range levels {
				for i, inv := range inventories {
					kinds := []string{"pvc"}
					if i == 0 && withS3 {
						kinds = append(kinds, "s3")
					}
					for _, kind := range kinds {
						m, err := agentBackup(bin, pg, s3, db, tmp, kind, level, inv, fmt.Sprintf("bench/%s-%d", strings.ReplaceAll(db, "_", "-"), r))
						if err != nil {
							return err
						}
						keep(m)
					}
				}
			}
		}
		var ms []measurement
		for _, c := range order {
			ms = append(ms, best[c])
		}
		rows = append(rows, row{dbBytes: dbBytes, ms: ms})
		if _, err := pg.SQL("postgres", fmt.Sprintf("DROP DATABASE %s", db)); err != nil {
			return err
		}
	}

	pgVersion, _ := pg.SQL("postgres", "SHOW server_version")
	fmt.Printf("Agent backup benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("Machine: %s, %d cores, %s; %s; PostgreSQL %s; best of %d runs\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), runtime.Version(), pgVersion, runs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| database (pg_database_size)\t pipeline\t time (s)\t throughput (MB/s)\t vs pg_dump -Fc \\| zstd\t output (MB)\t agent peak RSS (MiB)\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t")
	for _, r := range rows {
		base := r.ms[0].elapsed
		for _, m := range r.ms {
			ratio := base.Seconds() / m.elapsed.Seconds()
			fmt.Fprintf(tw, "| %.0f MB\t %s\t %.1f\t %.1f\t %.2f×\t %.1f\t %s\t\n", float64(r.dbBytes)/1e6,
				strings.ReplaceAll(m.config, "|", "\\|"), m.elapsed.Seconds(), mbps(r.dbBytes, m.elapsed), ratio, float64(m.outBytes)/1e6, rss(m.rssKiB))
		}
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Throughput is the database's on-disk size (pg_database_size) divided by wall time.")
	fmt.Println("Targets: agent throughput ≥ 0.95× `pg_dump -Fc | zstd`; agent peak RSS ≤ 64 MiB.")
	for _, r := range rows {
		base := r.ms[0].elapsed
		for _, m := range r.ms {
			if !strings.HasPrefix(m.config, "agent") {
				continue
			}
			ratio := base.Seconds() / m.elapsed.Seconds()
			fmt.Printf("  %.0f MB, %s: throughput %.2f× (%s), peak RSS %s MiB (%s)\n", float64(r.dbBytes)/1e6, m.config, ratio,
				verdict(ratio >= 0.95), rss(m.rssKiB), verdict(m.rssKiB > 0 && m.rssKiB <= 64<<10))
		}
	}
	return nil
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

// baseline runs pg_dump -Fc (with its default compression, or -Z0) into
// zstd at its default level.
func baseline(pg *testenv.Postgres, db, tmp string, z0 bool) (measurement, error) {
	out := filepath.Join(tmp, "baseline.dump.zst")
	defer os.Remove(out)
	name, extra := "pg_dump -Fc | zstd", ""
	if z0 {
		name, extra = "pg_dump -Fc -Z0 | zstd", " -Z0"
	}
	script := fmt.Sprintf("%s/pg_dump -Fc%s -d %s | zstd -q > %s", testenv.PGBinDir, extra, db, out)
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Env = pg.Env()
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		return measurement{}, fmt.Errorf("%s: %w: %s", name, err, b)
	}
	elapsed := time.Since(start)
	fi, err := os.Stat(out)
	if err != nil {
		return measurement{}, err
	}
	return measurement{config: name, elapsed: elapsed, outBytes: fi.Size()}, nil
}

func agentBackup(bin string, pg *testenv.Postgres, s3 *testenv.S3, db, tmp, kind, level, inventory, job string) (measurement, error) {
	env := []string{
		"PATH=" + testenv.PGBinDir + ":" + os.Getenv("PATH"),
		"HOME=" + tmp,
		"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(pg.Port),
		"CAIRN_DB_NAME=" + db, "CAIRN_DB_USER=" + pg.User, "CAIRN_DB_PASSWORD=" + pg.Password,
		"CAIRN_BACKUPJOB=" + job, "CAIRN_TERMINATION_LOG=" + filepath.Join(tmp, "termination-log"),
		"CAIRN_COMPRESSION=" + level, "CAIRN_INVENTORY=" + inventory,
	}
	pvcDir := filepath.Join(tmp, "pvc")
	switch kind {
	case "pvc":
		if err := os.MkdirAll(pvcDir, 0o755); err != nil {
			return measurement{}, err
		}
		defer os.RemoveAll(pvcDir)
		env = append(env, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvcDir)
	case "s3":
		env = append(env, "CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT="+s3.Endpoint(), "CAIRN_S3_BUCKET="+bucket,
			"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey)
	}
	a := &testenv.Agent{Bin: bin, Env: env, Dir: tmp}
	r := a.Run(nil, "backup")
	if r.Code != 0 {
		return measurement{}, fmt.Errorf("agent backup to %s failed: %s", kind, r.Stderr)
	}
	res, err := r.Result()
	if err != nil {
		return measurement{}, err
	}
	if kind == "s3" {
		// Free the space: delete the job's artifacts with the agent itself.
		if d := a.Run(nil, "delete"); d.Code != 0 {
			return measurement{}, fmt.Errorf("agent delete: %s", d.Stderr)
		}
	}
	name := "agent backup → " + strings.ToUpper(kind)
	if level != "default" {
		name += " (zstd " + level + ")"
	}
	if len(inventories) > 1 {
		name += ", inventory " + inventory
	}
	return measurement{config: name, elapsed: r.Elapsed, outBytes: res.Size, rssKiB: r.PeakRSSKiB}, nil
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
