package suite

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/contract"
)

// envValue is key's value in an agent environment (the last one wins).
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if rest, ok := strings.CutPrefix(kv, key+"="); ok {
			v = rest
		}
	}
	return v
}

// MigrateCutoverSourceChanged: a row written to the source after
// verification is never left behind. cutover (Full) compares the source
// again; while the writes are not known to be stopped it only reports the
// table that changed (the operator fails, switches nothing). With the
// writes stopped — the source made read-only (PostgreSQL) or the writers
// declared stopped by the user (MariaDB, which cannot make one database
// read-only) — it copies the changed tables again, compares again, and the
// late row is on the target.
func MigrateCutoverSourceChanged(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_late")
	tables := seedTables(e)
	if e.DB.Engine() == "postgres" {
		// A foreign key to the table that changes: copying orders again
		// must not be refused for it, and the key holds afterwards.
		_, err := e.DB.SQL(m.src, "CREATE TABLE order_notes (id int PRIMARY KEY, order_id bigint NOT NULL REFERENCES orders(id)); INSERT INTO order_notes SELECT 1, min(id) FROM orders")
		check(t, err)
		tables++
	}
	m.ok(t, "copy")
	allMatch(t, m.verified(t), tables)
	_, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 42)")
	check(t, err)
	lateOnTarget := func() string {
		t.Helper()
		out, err := e.DB.SQL(m.dst, "SELECT count(*) FROM orders WHERE total = 42")
		check(t, err)
		return strings.TrimSpace(out)
	}

	// Writes not stopped: reported, not copied.
	res := m.ok(t, "cutover")
	// orders differs by the row (MariaDB's seed also has a trigger that
	// writes audit).
	v := res.Verification
	if v == nil {
		t.Fatalf("cutover after a late row reported no comparison: %q", res.Actions)
	}
	late := false
	for _, it := range v.Items {
		if !it.Match && strings.HasSuffix(it.Table, "orders") && it.SourceRows == it.TargetRows+1 {
			late = true
		}
	}
	if v.Mismatched < 1 || !late || len(res.Recopied) != 0 {
		t.Fatalf("cutover after a late row, writes not stopped: verification %+v, recopied %q, actions %q", v, res.Recopied, res.Actions)
	}
	if n := lateOnTarget(); n != "0" {
		t.Fatalf("writes not stopped: the cutover copied the late row anyway (%s on the target)", n)
	}

	// Writes stopped: the changed tables are copied again.
	stop := []string{"CAIRN_CUTOVER_WRITERS_STOPPED=true"}
	if e.DB.Engine() == "postgres" {
		stop = []string{"CAIRN_CUTOVER_SOURCE_READ_ONLY=true"}
	}
	res = m.ok(t, "cutover", stop...)
	acts := strings.Join(res.Actions, "\n")
	if res.Verification == nil || res.Verification.Mismatched != 0 || !slices.ContainsFunc(res.Recopied, func(k string) bool { return strings.HasSuffix(k, "orders") }) ||
		!strings.Contains(acts, "re-copied") || !strings.Contains(acts, "orders") {
		t.Fatalf("cutover with writes stopped after a late row: verification %+v, recopied %q, actions %q", res.Verification, res.Recopied, res.Actions)
	}
	if n := lateOnTarget(); n != "1" {
		t.Fatalf("the row written after verification is not on the target after cutover: %s rows", n)
	}
	if e.DB.Engine() == "postgres" {
		out, err := e.DB.SQL(m.dst, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'order_notes'::regclass AND contype = 'f'")
		check(t, err)
		if strings.TrimSpace(out) != "1" {
			t.Errorf("the foreign key to the table copied again is gone from the target: %s", out)
		}
	}
	// The target is what the source is: an unchanged second cutover copies
	// nothing.
	res = m.ok(t, "cutover", stop...)
	if res.Verification == nil || res.Verification.Mismatched != 0 || len(res.Recopied) != 0 || !strings.Contains(strings.Join(res.Actions, "\n"), "equal to the target") {
		t.Fatalf("cutover of an unchanged source: %+v %q %q", res.Verification, res.Recopied, res.Actions)
	}
	if e.DB.Engine() == "postgres" {
		if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 44)"); err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("a write after a cutover that went through: %v", err)
		}
		// abort (the migration failed later, e.g. the Secret could not be
		// switched): the source is writable again.
		ab := m.ok(t, "abort", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
		if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 45)"); err != nil {
			t.Errorf("a write after abort: %v (%q)", err, ab.Actions)
		}
	}
}

// MigrateCutoverReadOnlyHalfway (PostgreSQL): a source user that owns the
// database but may not end other roles' sessions. precheck says so before
// anything is copied; a cutover run anyway fails without leaving the
// source read-only, and says it undid it.
func MigrateCutoverReadOnlyHalfway(t *testing.T, e *Env) {
	const user, pw = "cairn_nosignal", "NoSignal-pw-8c2f"
	m := newMigration(t, e, "mig_half")
	_, err := e.DB.SQL("postgres", "DROP ROLE IF EXISTS "+user+"; CREATE ROLE "+user+" LOGIN PASSWORD '"+pw+"'; ALTER DATABASE "+m.src+" OWNER TO "+user)
	check(t, err)
	t.Cleanup(func() {
		e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" OWNER TO CURRENT_USER")
		e.DB.Drop(m.src)
		e.DB.SQL("postgres", "DROP ROLE IF EXISTS "+user)
	})
	_, err = e.DB.SQL(m.src, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+user)
	check(t, err)
	as := []string{"CAIRN_DB_USER=" + user, "CAIRN_DB_PASSWORD=" + pw, "CAIRN_CUTOVER_SOURCE_READ_ONLY=true"}
	pre := m.ok(t, "precheck", as...)
	if !strings.Contains(strings.Join(pre.Problems, "\n"), "pg_signal_backend") {
		t.Errorf("precheck with sourceReadOnly and no pg_signal_backend: problems %q", pre.Problems)
	}
	if strings.Contains(strings.Join(pre.Problems, "\n"), "owns database") {
		t.Errorf("precheck: the owner is reported unable to ALTER DATABASE: %q", pre.Problems)
	}
	// A session of another (super)user on the source: the cutover cannot
	// end it.
	ctx := context.Background()
	env := e.DB.AgentEnv(m.src)
	held, err := pgx.Connect(ctx, "host=127.0.0.1 port="+envValue(env, "CAIRN_DB_PORT")+" dbname="+m.src+
		" user="+envValue(env, "CAIRN_DB_USER")+" password="+envValue(env, "CAIRN_DB_PASSWORD"))
	check(t, err)
	defer held.Close(ctx)
	r := m.run(t, "cutover", append(as, "CAIRN_MIGRATE_VERIFY=None")...)
	mustExit(t, r, contract.ExitFailure)
	if !strings.Contains(r.TermLog, "writable again") {
		t.Errorf("failed cutover does not say it undid the read-only: %s", r.TermLog)
	}
	if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 1)"); err != nil {
		t.Errorf("the source stayed read-only after a cutover that failed halfway: %v", err)
	}
	if _, err := held.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("the other session was ended: %v", err)
	}
}

// replicationLeft counts the migration's replication objects on the
// source (slot, publication) and the target (subscription).
func (m *migration) replicationLeft(t *testing.T, names *contract.Replication) (slots, pubs, subs string) {
	t.Helper()
	var err error
	slots, err = m.e.DB.SQL(m.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+names.Slot+"'")
	check(t, err)
	pubs, err = m.e.DB.SQL(m.src, "SELECT count(*) FROM pg_publication WHERE pubname = '"+names.Publication+"'")
	check(t, err)
	subs, err = m.e.DB.SQL(m.dst, "SELECT count(*) FROM pg_subscription WHERE subname = '"+names.Subscription+"'")
	check(t, err)
	return strings.TrimSpace(slots), strings.TrimSpace(pubs), strings.TrimSpace(subs)
}

// MigrateReplicationNeverLeaks (PostgreSQL): every way a Continuous
// migration can fail after replication-start leaves no slot or publication
// on the source — a slot nobody reads retains WAL without bound.
//   - the target is down: replication-start creates nothing on the source;
//   - the subscription is refused (a target user that may not create one):
//     the slot and publication it created are dropped again;
//   - a later failure (verify mismatch, deletion) runs abort: slot and
//     publication dropped even when the target is unreachable, the
//     subscription too once it is reachable;
//   - replication-stop (cutover) waits for the target to apply what was
//     written right before it, so no row and no sequence value is lost.
func MigrateReplicationNeverLeaks(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_leak", "CAIRN_MIGRATE_MODE=Continuous")
	m.ok(t, "copy")
	names := &contract.Replication{}

	// Target down.
	r := m.run(t, "replication-start", "CAIRN_TARGET_DB_PORT=1")
	mustExit(t, r, contract.ExitFailure)
	if out, err := e.DB.SQL(m.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'cairn\\_%'"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("target down: slots on the source: %s %v", out, err)
	}
	if out, err := e.DB.SQL(m.src, "SELECT count(*) FROM pg_publication WHERE pubname LIKE 'cairn\\_%'"); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("target down: publications on the source: %s %v", out, err)
	}

	// Subscription refused: a target user that is not a superuser
	// (PostgreSQL 15 lets only superusers create subscriptions).
	const user, pw = "cairn_nosub", "NoSub-pw-2b7e"
	_, err := e.DB.SQL("postgres", "DROP ROLE IF EXISTS "+user+"; CREATE ROLE "+user+" LOGIN PASSWORD '"+pw+"'")
	check(t, err)
	t.Cleanup(func() { e.DB.SQL("postgres", "DROP ROLE IF EXISTS "+user) })
	r = m.run(t, "replication-start", "CAIRN_TARGET_DB_USER="+user, "CAIRN_TARGET_DB_PASSWORD="+pw)
	mustExit(t, r, contract.ExitFailure)
	if !strings.Contains(r.TermLog, "create subscription") || !strings.Contains(r.TermLog, "dropped again") {
		t.Errorf("refused subscription: %s", r.TermLog)
	}
	if out, _ := e.DB.SQL(m.src, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'cairn\\_%'"); strings.TrimSpace(out) != "0" {
		t.Errorf("refused subscription: %s slot(s) left on the source", out)
	}
	if out, _ := e.DB.SQL(m.src, "SELECT count(*) FROM pg_publication WHERE pubname LIKE 'cairn\\_%'"); strings.TrimSpace(out) != "0" {
		t.Errorf("refused subscription: %s publication(s) left on the source", out)
	}

	// Started; then the migration fails (verify mismatch, deletion) with
	// the target unreachable: abort frees the source anyway.
	start := m.ok(t, "replication-start")
	*names = *start.Replication
	if s, p, sub := m.replicationLeft(t, names); s != "1" || p != "1" || sub != "1" {
		t.Fatalf("after replication-start: slot %s publication %s subscription %s", s, p, sub)
	}
	r = m.run(t, "abort", "CAIRN_TARGET_DB_PORT=1")
	mustExit(t, r, contract.ExitFailure) // says the target was not cleaned
	if s, p, _ := m.replicationLeft(t, names); s != "0" || p != "0" {
		t.Errorf("abort with the target down: slot %s publication %s left on the source", s, p)
	}
	ab := m.ok(t, "abort") // repeated with the target back: the subscription goes too
	if s, p, sub := m.replicationLeft(t, names); s != "0" || p != "0" || sub != "0" {
		t.Errorf("abort: slot %s publication %s subscription %s left (%q)", s, p, sub, ab.Actions)
	}

	// Again, for a cutover under writes: rows and sequence values written
	// right before replication-stop reach the target.
	check(t, e.DB.Drop(m.dst))
	m.ok(t, "copy")
	m.ok(t, "replication-start")
	m.ok(t, "verify") // waits for the initial synchronisation
	_, err = e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total, note) SELECT 1, g, 'late' FROM generate_series(1, 5000) g")
	check(t, err)
	m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	// A last writer that had its session before the cutover commits right
	// before replication-stop (asynchronously, as the test server commits:
	// its WAL may not be written yet when replication-stop starts).
	_, err = e.DB.SQL(m.src, "SET default_transaction_read_only = off; INSERT INTO orders (customer_id, total, note) SELECT 2, g, 'last' FROM generate_series(1, 50) g")
	check(t, err)
	stop := m.ok(t, "replication-stop")
	if !strings.Contains(strings.Join(stop.Actions, "\n"), "applied every change") {
		t.Errorf("replication-stop actions: %q", stop.Actions)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Errorf("rows written right before replication-stop are missing on the target:\n%s\nsource:\n%s", dst, src)
	}
	if s, p, sub := m.replicationLeft(t, names); s != "0" || p != "0" || sub != "0" {
		t.Errorf("after replication-stop: slot %s publication %s subscription %s", s, p, sub)
	}
	_, _ = e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" RESET default_transaction_read_only")
}

// MigrateRecopyFailureKeepsTriggers (MariaDB): the cutover's copy of a
// changed table drops the target table's triggers while it copies (so
// they do not fire for copied rows). A copy that fails halfway — here a
// late row the target's narrower column refuses in strict mode — must not
// leave the target without them: the cutover fails, and the trigger is
// there again.
func MigrateRecopyFailureKeepsTriggers(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_trig")
	tables := seedTables(e)
	m.ok(t, "copy")
	allMatch(t, m.verified(t), tables)
	triggers := func() string {
		t.Helper()
		out, err := e.DB.SQL(m.dst, "SELECT count(*) FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND event_object_table = 'orders'")
		check(t, err)
		return strings.TrimSpace(out)
	}
	before := triggers()
	if before == "0" {
		t.Fatalf("the seed's orders trigger was not copied to the target")
	}
	_, err := e.DB.SQL(m.dst, "ALTER TABLE orders MODIFY note VARCHAR(120)")
	check(t, err)
	_, err = e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total, note) VALUES (1, 43, REPEAT('y', 500))")
	check(t, err)

	r := m.run(t, "cutover", "CAIRN_CUTOVER_WRITERS_STOPPED=true")
	if r.Code == 0 {
		t.Fatalf("cutover copying a row the target refuses succeeded")
	}
	if !strings.Contains(r.Stdout+r.Stderr, "orders") {
		t.Errorf("the failed cutover does not name the table: %s %s", r.Stdout, lastLines(r.Stderr, 5))
	}
	if after := triggers(); after != before {
		t.Fatalf("after a cutover whose copy failed halfway the target's orders has %s triggers, had %s", after, before)
	}
}

// MigrateCutoverPostgres: cutover makes the source read-only, ends its
// sessions and compares the source again with the target; repeated, it is
// the same.
func MigrateCutoverPostgres(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_cut")
	res := m.ok(t, "cutover", "CAIRN_MIGRATE_VERIFY=None")
	if len(res.Actions) != 1 || !strings.Contains(res.Actions[0], "none") {
		t.Errorf("cutover without sourceReadOnly nor verification: %+v", res.Actions)
	}
	if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 1)"); err != nil {
		t.Fatalf("a write before cutover: %v", err)
	}
	m.ok(t, "copy")
	for range 2 {
		res = m.ok(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
		if len(res.Actions) != 3 || !strings.Contains(res.Actions[0], "read-only") || !strings.Contains(res.Actions[2], "equal to the target") {
			t.Errorf("cutover actions: %q", res.Actions)
		}
	}
	if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 1)"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write after cutover: %v", err)
	}
	// Reads still work, and a verify can still run.
	if _, err := e.DB.SQL(m.src, "SELECT count(*) FROM orders"); err != nil {
		t.Errorf("a read after cutover: %v", err)
	}
	_, _ = e.DB.SQL("postgres", "ALTER DATABASE "+m.src+" RESET default_transaction_read_only")
}

// MigrateCutoverMariaDB: MariaDB has no per-database read-only; cutover
// with sourceReadOnly refuses (exit 2) and changes nothing.
func MigrateCutoverMariaDB(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_cut")
	r := m.run(t, "cutover", "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")
	mustExit(t, r, contract.ExitUsage)
	if !strings.Contains(r.TermLog, "MariaDB") {
		t.Errorf("reason: %s", r.TermLog)
	}
	if _, err := e.DB.SQL(m.src, "INSERT INTO orders (customer_id, total) VALUES (1, 1)"); err != nil {
		t.Errorf("a write after the refused cutover: %v", err)
	}
}
