package main

// The point-in-time bench's log reading, figures and table (pitr.go).

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// logMarks are the times of an agent run's log messages (the first of
// each), from its text log.
func logMarks(stderr string) map[string]time.Time {
	m := map[string]time.Time{}
	for _, line := range strings.Split(stderr, "\n") {
		ts, ok := field(line, "time=")
		if !ok {
			continue
		}
		msg, ok := field(line, "msg=")
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		if _, seen := m[msg]; !seen {
			m[msg] = t
		}
	}
	return m
}

// field is the value of key in a text log line (quoted or not).
func field(line, key string) (string, bool) {
	i := strings.Index(line, key)
	if i < 0 || i > 0 && line[i-1] != ' ' {
		return "", false
	}
	v := line[i+len(key):]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u, true
		}
		return "", false
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v, true
}

// pct is the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// parseAges reads -pitr-ages.
func parseAges(f string) ([]time.Duration, error) {
	var out []time.Duration
	for _, s := range strings.Split(f, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second || d > time.Hour {
			return nil, fmt.Errorf("-pitr-ages: bad age %q (1s..1h)", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// printPITR prints the point-in-time tables.
func printPITR(lags []lagRow, restores []restoreRow, wall time.Duration) {
	fmt.Println()
	fmt.Printf("Point-in-time recovery (issue 27): archive lag under a write load, and a restore to a time next to a plain restore (%.0f s)\n", wall.Seconds())
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| engine\t max segment age\t connections\t other engine loaded too\t commits\t load (s)\t write rate (tx/s)\t log written (MB/s)\t lag p50 (s)\t lag p99 (s)\t lag max (s)\t segments\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, l := range lags {
		age := l.age.String()
		if l.age == defaultSegmentAge {
			age += " (default)"
		}
		overlap := "no"
		if l.overlap {
			overlap = "yes"
		}
		fmt.Fprintf(tw, "| %s\t %s\t %d\t %s\t %d\t %.1f\t %.0f\t %.2f\t %.2f\t %.2f\t %.2f\t %d\t\n", l.engine, age, l.clients, overlap, l.commits,
			l.load.Seconds(), float64(l.commits)/l.load.Seconds(), l.logMB/l.load.Seconds(), pct(l.lags, 50).Seconds(),
			pct(l.lags, 99).Seconds(), l.lags[len(l.lags)-1].Seconds(), l.segments)
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Lag of a committed transaction: from the client's clock right after its COMMIT returned to the archiver's report")
	fmt.Println("that the log segment holding it is stored in S3 (object, then its record): every commit of the load counts, the")
	fmt.Println("bench waits after the load until the last one is archived. The segment is the one holding the log's end read right")
	fmt.Println("after the COMMIT on the same connection (PostgreSQL: pg_current_wal_insert_lsn() in the COMMIT's round trip; MariaDB:")
	fmt.Println("SHOW MASTER STATUS), never an earlier one. A segment is closed by the archiver every max segment age (pg_switch_wal,")
	fmt.Println("FLUSH BINARY LOGS) or, for PostgreSQL, when its 16 MiB are full. Archivers: the agent's pitr.WALArchiver")
	fmt.Println("(pg_receivewal) and pitr.Archiver (mariadb-binlog), in the bench's process as `agent archive` configures them, into")
	fmt.Println("versitygw. Load: PostgreSQL pgbench's TPC-B-like script on pgbench's tables (7 round trips a transaction, simple")
	fmt.Println("protocol); MariaDB sysbench oltp_write_only's statements on 4 tables + an INSERT into a commit log; a client per")
	fmt.Println("connection, unthrottled. Log written: the binary log's bytes; PostgreSQL's WAL records (pg_stat_wal.wal_bytes, not")
	fmt.Println("the unused rest of a switched segment). Segments: those holding the load's commits. Other engine loaded too: the")
	fmt.Println("run shared the machine with the other engine's (-pitr-overlap), which lowers its write rate, not its lag's bound.")
	fmt.Printf("The bench servers' durability settings: PostgreSQL fsync=off, synchronous_commit=off; MariaDB\n")
	fmt.Printf("innodb_flush_log_at_trx_commit=0 (as in the other cases). One run, no best-of.\n")
	if len(restores) == 0 {
		return
	}
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| engine\t restore\t total (s)\t fetch + check (s)\t base part (s)\t replay part (s)\t copy out (s)\t transactions (want)\t log replayed (MB)\t replay (tx/s)\t replay (MB/s)\t source write rate (tx/s)\t replay / source\t (fetch + check + replay) / source\t database (MB)\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, r := range restores {
		pre, base, replay, post, logMB, txps, mbps, ratio, ratio2 := "—", "—", "—", "—", "—", "—", "—", "—", "—"
		if r.replay > 0 {
			pre, base, replay = fmt.Sprintf("%.1f", r.pre.Seconds()), fmt.Sprintf("%.1f", r.base.Seconds()), fmt.Sprintf("%.1f", r.replay.Seconds())
			if r.post > 0 {
				post = fmt.Sprintf("%.1f", r.post.Seconds())
			}
			logMB = fmt.Sprintf("%.1f", r.logMB)
			tx := float64(r.txs) / r.replay.Seconds()
			txps, mbps = fmt.Sprintf("%.0f", tx), fmt.Sprintf("%.1f", r.logMB/r.replay.Seconds())
			ratio = fmt.Sprintf("%.2f×", tx/r.source)
			ratio2 = fmt.Sprintf("%.2f×", float64(r.txs)/(r.pre+r.replay).Seconds()/r.source)
		}
		fmt.Fprintf(tw, "| %s\t %s\t %.1f\t %s\t %s\t %s\t %s\t %d (%d)\t %s\t %s\t %s\t %.0f\t %s\t %s\t %.1f\t\n", r.engine, r.config, r.total.Seconds(),
			pre, base, replay, post, r.txs, r.wantTxs, logMB, txps, mbps, r.source, ratio, ratio2, r.dbMB)
	}
	tw.Flush()
	fmt.Println()
	fmt.Println("Restore to a time: the agent restores the point-in-time base taken before the load, then replays the archived log")
	fmt.Println("to the last whole second at least 1 s before the load's last commit. Parts, from the agent's log: fetch + check =")
	fmt.Println("verifying the artifact and checking the archive's segments (MariaDB: fetched and decoded once for the source")
	fmt.Println("guard); base = PostgreSQL unpacking the physical base, MariaDB restoring the base's dump; replay = PostgreSQL the")
	fmt.Println("temporary server's recovery (WAL fetched from the store by restore_command, replayed, promoted), MariaDB")
	fmt.Println("mariadb-binlog | mariadb into the target; copy out = PostgreSQL pg_dump | pg_restore of the recovered database into")
	fmt.Println("the target. Transactions: the load's transactions the restored database holds (want: the commits that returned")
	fmt.Println("before the target; for the plain restore, all of them). Log replayed: MariaDB the binary log from the load's start")
	fmt.Println("to the target's position; PostgreSQL the load's WAL per transaction × the transactions replayed. Replay rate =")
	fmt.Println("transactions / replay part; replay / source > 1: the replay is faster than the source wrote (source: the load's")
	fmt.Println("commits / its duration, on its connections; the replay is one stream). Database: the source's size after the load.")
	fmt.Println("Plain dump: the agent's logical backup of the source after the load (the same data), restored by the agent.")
}
