package suite

import (
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/test/load"
)

// liveSeed adds to db the tables a live load writes: live_events (bigint
// primary key, rows rows) and live_log (no primary key, REPLICA IDENTITY
// FULL, 2,000 rows: the case a Continuous migration can replicate without
// a key).
func liveSeed(t *testing.T, e *Env, db string, rows int) {
	t.Helper()
	_, err := e.DB.SQL(db, `CREATE TABLE live_events (id bigserial PRIMARY KEY, v int NOT NULL, note text, at timestamptz NOT NULL DEFAULT now());
INSERT INTO live_events (v, note) SELECT i, md5(i::text) FROM generate_series(1, `+itoa(rows)+`) i;
CREATE TABLE live_log (id bigint NOT NULL, v int NOT NULL);
ALTER TABLE live_log REPLICA IDENTITY FULL;
CREATE SEQUENCE live_log_id_seq OWNED BY live_log.id;
ALTER TABLE live_log ALTER COLUMN id SET DEFAULT nextval('live_log_id_seq');
INSERT INTO live_log (v) SELECT i FROM generate_series(1, 2000) i`)
	check(t, err)
}

// MigrateContinuousUnderLoad (PostgreSQL): a Continuous migration of a
// table of rows rows while a load writes rate rows a second to it
// (inserts, updates, deletes) and a tenth of that to a table without a
// primary key (REPLICA IDENTITY FULL), from precheck to cutover: verify
// converges (no table differs; the load wrote during it), then with the
// load stopped and the source read-only, replication-stop waits for the
// target, compares exactly, and source and target are equal table by
// table (the suite's fingerprint: counts, checksums, sequences), with
// every row the load inserted and none it deleted.
func MigrateContinuousUnderLoad(t *testing.T, e *Env, rows, rate int) {
	m := newMigration(t, e, "mig_live", "CAIRN_MIGRATE_MODE=Continuous")
	m.abortOnCleanup(t)
	liveSeed(t, e, m.src, rows)
	dsn := load.DSN(e.DB.AgentEnv(m.src))
	ld, err := load.Start(dsn, "live_events", rate, 10*time.Minute)
	check(t, err)
	defer ld.Stop()
	logLoad, err := load.Start(dsn, "live_log", max(rate/10, 10), 10*time.Minute)
	check(t, err)
	defer logLoad.Stop()
	start := time.Now()
	if pre := m.ok(t, "precheck"); len(pre.Problems) != 0 {
		t.Fatalf("precheck: %q", pre.Problems)
	}
	m.ok(t, "copy")
	m.ok(t, "replication-start")
	before := ld.Written()
	v := m.ok(t, "verify")
	during := ld.Written() - before
	ready := time.Since(start)
	if v.Verification == nil || v.Verification.Mismatched != 0 {
		t.Fatalf("verify under a load of %d rows/s: %+v %q", rate, v.Verification, v.Actions)
	}
	if during == 0 {
		t.Fatalf("the load wrote nothing while verify ran: it did not test convergence (%s)", ld.FirstError())
	}
	for _, it := range v.Verification.Items {
		if it.State == "" {
			t.Errorf("table %s has no state: %+v", it.Table, it)
		}
	}
	st := m.ok(t, "replication-status")
	t.Logf("verify: %q; %d rows written during it; create → verified %s; lag then %d bytes, %.3f s",
		v.Actions, during, ready.Round(time.Millisecond), st.Replication.LagBytes, st.Replication.LagSeconds)
	stats, logStats := ld.Stop(), logLoad.Stop()
	t.Logf("load on live_events: %s; on live_log (no primary key): %s", stats, logStats)
	if stats.Errors > 0 || logStats.Errors > 0 {
		t.Errorf("the load's writes failed on the source: %s %s", ld.FirstError(), logLoad.FirstError())
	}
	m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	stop := m.ok(t, "replication-stop")
	if stop.Verification == nil || stop.Verification.Mismatched != 0 || stop.Verification.Tables != seedTables(e)+2 {
		t.Fatalf("replication-stop's exact check: %+v", stop.Verification)
	}
	if !strings.Contains(strings.Join(stop.Actions, "\n"), "compared exactly") {
		t.Errorf("replication-stop did not say it compared exactly: %q", stop.Actions)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Errorf("after cutover the target differs:\n%s\nsource:\n%s", dst, src)
	}
	// No row lost: the target has the seed's rows plus the inserts less
	// the deletes, as the source does.
	want := int64(rows) + stats.Inserted - stats.Deleted
	if got, err := e.DB.SQL(m.dst, "SELECT count(*) FROM live_events"); err != nil || got != itoa(int(want)) {
		t.Errorf("target live_events: %s rows (%v), want %d", got, err, want)
	}
	_, _ = e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" RESET default_transaction_read_only")
}

// MigrateContinuousDiffers (PostgreSQL): a row changed on the target
// behind replication's back, while a load writes to the source: verify
// re-checks, finds the row unchanged on the source, and reports the table
// differs (only that one); at cutover replication-stop's exact check
// finds it again and stops nothing — the slot stays for the abort, which
// drops it.
func MigrateContinuousDiffers(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_live_bad", "CAIRN_MIGRATE_MODE=Continuous")
	m.abortOnCleanup(t)
	liveSeed(t, e, m.src, 20000)
	m.ok(t, "precheck")
	m.ok(t, "copy")
	start := m.ok(t, "replication-start")
	if v := m.ok(t, "verify"); v.Verification == nil || v.Verification.Mismatched != 0 {
		t.Fatalf("verify before the target was changed: %+v", v.Verification)
	}
	// id 0 is never written by the load (it writes ids ≥ 1): a row only
	// the target has.
	_, err := e.DB.SQL(m.dst, "INSERT INTO live_events (id, v) VALUES (0, 0)")
	check(t, err)
	ld, err := load.Start(load.DSN(e.DB.AgentEnv(m.src)), "live_events", 200, 10*time.Minute)
	check(t, err)
	defer ld.Stop()
	v := m.ok(t, "verify").Verification
	if v == nil || v.Mismatched != 1 || v.Items[0].Table != "public.live_events" || v.Items[0].State != contract.StateDiffers ||
		v.Items[0].Rechecks < 2 || v.Items[0].Rows != 1 {
		t.Fatalf("verify with a row only on the target: %+v", v)
	}
	t.Logf("load: %s", ld.Stop())
	m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	stop := m.ok(t, "replication-stop")
	if stop.Verification == nil || stop.Verification.Mismatched != 1 {
		t.Fatalf("replication-stop's exact check with a row only on the target: %+v %q", stop.Verification, stop.Actions)
	}
	slot := "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + start.Replication.Slot + "'"
	if out, err := e.DB.SQL(m.src, slot); err != nil || out != "1" {
		t.Errorf("after a failed exact check the slot must stay for the abort: %s %v", out, err)
	}
	m.ok(t, "abort", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	if out, err := e.DB.SQL(m.src, slot); err != nil || out != "0" {
		t.Errorf("abort left the slot: %s %v", out, err)
	}
}

// MigrateContinuousTruncateAndSequences (PostgreSQL): what replication
// carries besides rows. A TRUNCATE of a published table on the source is
// replicated (the target's table is emptied too, then takes the rows
// inserted after it); sequences are not replicated while it runs (the
// target's stays where the copy left it) and are copied at
// replication-stop, after the last change was applied: the fingerprints
// (sequences included) are then equal.
func MigrateContinuousTruncateAndSequences(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_live_trunc", "CAIRN_MIGRATE_MODE=Continuous")
	m.abortOnCleanup(t)
	liveSeed(t, e, m.src, 1000)
	m.ok(t, "precheck")
	m.ok(t, "copy")
	m.ok(t, "replication-start")
	m.ok(t, "verify")
	_, err := e.DB.SQL(m.src, "TRUNCATE live_log; INSERT INTO live_log (v) SELECT i FROM generate_series(1, 5) i")
	check(t, err)
	v := m.ok(t, "verify").Verification
	if v == nil || v.Mismatched != 0 || v.CatchingUp != 0 {
		t.Fatalf("verify after a TRUNCATE on the source: %+v", v)
	}
	if got, err := e.DB.SQL(m.dst, "SELECT count(*), min(id) FROM live_log"); err != nil || got != "5|2001" {
		t.Errorf("target live_log after the source's TRUNCATE and 5 inserts: %q %v, want 5 rows from id 2001", got, err)
	}
	seq := "SELECT last_value FROM live_log_id_seq"
	if src, _ := e.DB.SQL(m.src, seq); src != "2005" {
		t.Fatalf("source sequence: %s", src)
	}
	if dst, err := e.DB.SQL(m.dst, seq); err != nil || dst == "2005" {
		t.Errorf("target sequence while replicating: %s %v — sequences are not replicated (docs say so); has that changed?", dst, err)
	}
	m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	m.ok(t, "replication-stop")
	if dst, err := e.DB.SQL(m.dst, seq); err != nil || dst != "2005" {
		t.Errorf("target sequence after replication-stop: %s %v, want 2005", dst, err)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Errorf("after cutover the target differs:\n%s\nsource:\n%s", dst, src)
	}
	_, _ = e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" RESET default_transaction_read_only")
}

// abortOnCleanup runs abort when the test ends (before its databases are
// dropped): a test that failed midway leaves no slot behind to hold the
// source database for the next one.
func (m *migration) abortOnCleanup(t *testing.T) {
	t.Cleanup(func() {
		m.e.Agent.Run(append(append([]string{}, m.env...), "CAIRN_CUTOVER_SOURCE_READ_ONLY=true"), "migrate", "abort")
	})
}

// MigrateContinuous (PostgreSQL): copy (schema), replication-start (the
// subscription's initial sync), changes on the source reach the target,
// status reports lag and retained WAL and fails above the limit; cutover,
// replication-stop (sequences copied, subscription, slot and publication
// gone), repeated.
func MigrateContinuous(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_cont", "CAIRN_MIGRATE_MODE=Continuous")
	pre := m.ok(t, "precheck")
	if len(pre.Problems) != 0 {
		t.Fatalf("precheck: %q", pre.Problems)
	}
	m.ok(t, "copy")
	start := m.ok(t, "replication-start")
	r := start.Replication
	if r == nil || !strings.HasPrefix(r.Slot, "cairn_") || r.Publication == "" || r.Subscription == "" {
		t.Fatalf("replication-start: %+v", start)
	}
	// Repeated: nothing new is created.
	if again := m.ok(t, "replication-start"); len(again.Actions) != 0 {
		t.Errorf("repeated replication-start acted: %q", again.Actions)
	}
	// verify at once (as the operator runs it): it waits for the initial
	// table synchronisation, then compares at a WAL position the target
	// has applied.
	if v := m.ok(t, "verify"); v.Verification == nil || v.Verification.Mismatched != 0 || len(v.Actions) != 2 ||
		!strings.HasPrefix(v.Actions[0], "waited ") || !strings.HasPrefix(v.Actions[1], "compared at WAL positions the target had applied: 2 of 2 tables matched") {
		t.Fatalf("verify right after replication-start: %+v %q", v.Verification, v.Actions)
	}
	synced := func(what string) *contract.Replication {
		var last *contract.Replication
		err := testenv.Poll(2*time.Minute, 300*time.Millisecond, func() error {
			res := m.e.Agent.Run(m.env, "migrate", "replication-status")
			if res.Code != 0 {
				return errorf(res.Stderr)
			}
			st, err := contract.ParseMigration(res.TermLog)
			if err != nil {
				return err
			}
			last = st.Replication
			if last.SyncedTables != last.Tables || last.Tables != seedTables(e) {
				return errorf("tables synced: " + itoa(last.SyncedTables) + "/" + itoa(last.Tables))
			}
			if v := m.e.Agent.Run(m.env, "migrate", "verify"); v.Code != 0 || !strings.Contains(v.TermLog, `"mismatched":0`) {
				return errorf("not yet equal: " + v.TermLog)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v (last status %+v)", what, err, last)
		}
		return last
	}
	synced("initial sync")
	_, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total, note) VALUES (1, 7.5, 'during replication'); UPDATE customers SET name = 'renamed' WHERE id = 2; DELETE FROM orders WHERE id = 3")
	check(t, err)
	synced("changes")
	// A table created after replication-start is not in the publication:
	// status names it (and warns), until it is gone.
	if len(start.Warnings) != 0 {
		t.Errorf("replication-start warned: %q", start.Warnings)
	}
	_, err = e.DB.SQL(m.src, "CREATE TABLE late_table (id int PRIMARY KEY); INSERT INTO late_table VALUES (1)")
	check(t, err)
	late := m.ok(t, "replication-status")
	if late.Replication == nil || strings.Join(late.Replication.NotReplicated, ",") != "public.late_table" ||
		len(late.Warnings) != 1 || !strings.Contains(late.Warnings[0], "table public.late_table is not replicated") {
		t.Errorf("status after a table was created on the source: %+v %+v", late.Warnings, late.Replication)
	}
	_, err = e.DB.SQL(m.src, "DROP TABLE late_table")
	check(t, err)
	if st := m.ok(t, "replication-status"); len(st.Warnings) != 0 || len(st.Replication.NotReplicated) != 0 {
		t.Errorf("status after the late table was dropped: %+v", st)
	}
	over := m.run(t, "replication-status", "CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES=1")
	mustExit(t, over, contract.ExitFailure)
	if !strings.Contains(over.TermLog, "retained WAL") || !strings.Contains(over.TermLog, "above limit 1") {
		t.Errorf("status above the WAL limit: %s", over.TermLog)
	}
	m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	synced("after cutover")
	stop := m.ok(t, "replication-stop")
	t.Logf("stop: %q", stop.Actions)
	for _, q := range []string{
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + r.Slot + "'",
		"SELECT count(*) FROM pg_publication WHERE pubname = '" + r.Publication + "'",
		"SELECT count(*) FROM pg_subscription WHERE subname = '" + r.Subscription + "'",
	} {
		if out, err := e.DB.SQL(m.src, q); err != nil || out != "0" {
			t.Errorf("%s: %s %v", q, out, err)
		}
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Errorf("after replication-stop the target differs (sequences?):\n%s\nsource:\n%s", dst, src)
	}
	m.ok(t, "replication-stop")
	_, _ = e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" RESET default_transaction_read_only")
}
