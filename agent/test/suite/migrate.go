package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// migration is one source → target pair on the test server.
type migration struct {
	e        *Env
	src, dst string
	env      []string // agent environment: source, target, migration
}

func newMigration(t *testing.T, e *Env, name string, extra ...string) *migration {
	t.Helper()
	m := &migration{e: e, src: name + "_src", dst: name + "_dst"}
	check(t, e.DB.Seed(m.src))
	check(t, e.DB.Drop(m.dst))
	t.Cleanup(func() { e.DB.Drop(m.src); e.DB.Drop(m.dst) })
	m.env = append(append(append([]string{}, e.DB.AgentEnv(m.src)...), targetEnv(e.DB.AgentEnv(m.dst))...),
		"CAIRN_MIGRATION=shop/"+strings.ReplaceAll(name, "_", "-"), "CAIRN_MIGRATION_UID=0b7a2c5e-uid")
	m.env = append(m.env, extra...)
	return m
}

// targetEnv turns CAIRN_DB_* settings into CAIRN_TARGET_DB_* ones.
func targetEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if rest, ok := strings.CutPrefix(kv, "CAIRN_DB_"); ok {
			out = append(out, "CAIRN_TARGET_DB_"+rest)
		}
	}
	return out
}

func (m *migration) run(t *testing.T, step string, extra ...string) testenv.Run {
	t.Helper()
	r := m.e.Agent.Run(append(append([]string{}, m.env...), extra...), "migrate", step)
	t.Logf("agent migrate %s: exit %d in %s\nstdout: %s\nstderr: %s", step, r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, lastLines(r.Stderr, 12))
	noSecrets(t, r)
	return r
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ok runs a step that must succeed and returns its result.
func (m *migration) ok(t *testing.T, step string, extra ...string) *contract.MigrationResult {
	t.Helper()
	r := m.run(t, step, extra...)
	if r.Code != 0 {
		t.Fatalf("migrate %s: exit %d: %s", step, r.Code, lastLine(r.Stderr))
	}
	res, err := contract.ParseMigration(r.TermLog)
	if err != nil {
		t.Fatalf("migrate %s: termination message %q: %v", step, r.TermLog, err)
	}
	if res.Step != step || strings.TrimSpace(r.Stdout) != strings.TrimSpace(r.TermLog) || len(r.TermLog) > contract.MaxMessageBytes {
		t.Fatalf("migrate %s: result %q (stdout %q)", step, r.TermLog, r.Stdout)
	}
	return res
}

// verified runs verify and returns its verification.
func (m *migration) verified(t *testing.T, extra ...string) *contract.Verification {
	t.Helper()
	res := m.ok(t, "verify", extra...)
	if res.Verification == nil {
		t.Fatalf("verify reported no verification")
	}
	return res.Verification
}

func allMatch(t *testing.T, v *contract.Verification, tables int) {
	t.Helper()
	if v.Mismatched != 0 || v.Matched != tables || v.Tables != tables {
		t.Fatalf("verification: %+v, want %d tables all matched", v, tables)
	}
}

// seedTables is how many tables Seed creates.
func seedTables(e *Env) int {
	if e.DB.Engine() == "mysql" {
		return 3 // customers, orders, audit
	}
	return 2 // customers, orders
}

// MigrateDirect: precheck, copy, verify; the target equals the source by
// the suite's own fingerprint (schema objects too); a second precheck finds
// the target non-empty.
func MigrateDirect(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_direct")
	pre := m.ok(t, "precheck")
	if len(pre.Problems) != 0 || pre.Tables != seedTables(e) || pre.EstimatedBytes <= 0 || pre.SourceVersion == "" || pre.TargetVersion == "" {
		t.Fatalf("precheck: %+v", pre)
	}
	cp := m.ok(t, "copy")
	if cp.TablesDone != seedTables(e) || cp.Bytes <= 0 {
		t.Errorf("copy: %+v", cp)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("target differs from source:\n%s\nsource:\n%s", dst, src)
	}
	allMatch(t, m.verified(t), seedTables(e))
	allMatch(t, m.verified(t, "CAIRN_MIGRATE_VERIFY=RowCount"), seedTables(e))

	again := m.ok(t, "precheck")
	if len(again.Problems) != seedTables(e) || !strings.Contains(again.Problems[0], "target already has table") {
		t.Errorf("precheck over the copied target: %q", again.Problems)
	}
	if allowed := m.ok(t, "precheck", "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET=true"); len(allowed.Problems) != 0 {
		t.Errorf("precheck with allowNonEmptyTarget: %q", allowed.Problems)
	}
	// A copy over a copied target (allowNonEmptyTarget, or a retry)
	// replaces the tables: still equal, no duplicate rows.
	m.ok(t, "copy")
	allMatch(t, m.verified(t), seedTables(e))
}

// Catch is a change to a migrated target that verify must find.
type Catch struct {
	SQL, Table, Reason string
	// Undo runs after the next copy (which does not remove tables that
	// are only on the target).
	Undo string
}

// MigrateVerifyCatches changes the target after a copy, one way at a time,
// and checks that verify names the table and the reason, mismatches first.
func MigrateVerifyCatches(t *testing.T, e *Env, catches []Catch) {
	m := newMigration(t, e, "mig_catch")
	m.ok(t, "copy")
	allMatch(t, m.verified(t), seedTables(e))
	for _, c := range catches {
		_, err := e.DB.SQL(m.dst, c.SQL)
		check(t, err)
		v := m.verified(t)
		if v.Mismatched != 1 || len(v.Items) == 0 || v.Items[0].Match || v.Items[0].Reason != c.Reason || v.Items[0].Table != c.Table {
			t.Errorf("after %q: %+v, want %s %q first", c.SQL, v, c.Table, c.Reason)
		}
		for i := 1; i < len(v.Items); i++ {
			if v.Items[i-1].Match && !v.Items[i].Match {
				t.Errorf("a mismatch after a match: %+v", v.Items)
			}
		}
		if c.Reason == "content differs" {
			// A row count cannot see a changed value.
			if rc := m.verified(t, "CAIRN_MIGRATE_VERIFY=RowCount"); rc.Mismatched != 0 {
				t.Errorf("RowCount after a changed value: %+v", rc)
			}
		}
		m.ok(t, "copy", "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET=true")
		if c.Undo != "" {
			_, err := e.DB.SQL(m.dst, c.Undo)
			check(t, err)
		}
		allMatch(t, m.verified(t), seedTables(e))
	}
}

// MigrateIncludeExclude copies a selection: only it lands on the target,
// and verify compares only it.
func MigrateIncludeExclude(t *testing.T, e *Env, include, exclude string, want []string, notWant []string) {
	m := newMigration(t, e, "mig_sel", "CAIRN_MIGRATE_INCLUDE="+include, "CAIRN_MIGRATE_EXCLUDE="+exclude)
	pre := m.ok(t, "precheck")
	if pre.Tables != len(want) || len(pre.Problems) != 0 {
		t.Fatalf("precheck: %+v", pre)
	}
	m.ok(t, "copy")
	v := m.verified(t)
	allMatch(t, v, len(want))
	var got []string
	for _, c := range v.Items {
		got = append(got, c.Table)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("verified %q, want %q", got, want)
	}
	for _, tbl := range notWant {
		if out, err := e.DB.SQL(m.dst, "SELECT COUNT(*) FROM "+tbl); err == nil {
			t.Errorf("excluded table %s is on the target (%s rows)", tbl, out)
		}
	}
	bad := m.run(t, "precheck", "CAIRN_MIGRATE_INCLUDE=a,,b")
	mustExit(t, bad, contract.ExitUsage)
}

// MigrateSchemaOnly copies the schema without rows.
func MigrateSchemaOnly(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_schema", "CAIRN_MIGRATE_MODE=SchemaOnly")
	m.ok(t, "copy")
	v := m.verified(t, "CAIRN_MIGRATE_VERIFY=RowCount")
	if v.Tables != seedTables(e) || v.Mismatched == 0 {
		t.Fatalf("schema-only target against the source: %+v", v)
	}
	for _, c := range v.Items {
		// Every table is there, empty (a table empty on the source too
		// matches).
		if c.TargetRows != 0 || (c.SourceRows > 0) != (c.Reason == "rows differ") {
			t.Errorf("schema-only table %+v", c)
		}
	}
}

// MigrateKilledCopy kills the agent (SIGKILL) while a copy streams (a
// proxy in front of the source stalls it mid-data), then retries the copy:
// it must succeed with no duplicate rows.
func MigrateKilledCopy(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_killed")
	check(t, e.DB.SeedBig(m.src, 24))
	proxy, err := testenv.NewStallProxy("127.0.0.1:"+itoa(e.DB.Port()), 12<<20)
	check(t, err)
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, _, err := e.Agent.Command(ctx, append(append([]string{}, m.env...), "CAIRN_DB_PORT="+itoa(proxy.Port()), "CAIRN_MIGRATE_PARALLEL=2"), "migrate", "copy")
	check(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-proxy.Stalled():
	case err := <-exited:
		t.Fatalf("copy ended before the proxy stalled it (%v): %s", err, stderr.String())
	case <-ctx.Done():
		t.Fatal("the proxy never stalled")
	}
	check(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	proxy.Close()
	t.Logf("killed after %d MiB from the source; log:\n%s", proxy.Passed()>>20, lastLines(stderr.String(), 10))
	if _, err := e.DB.SQL(m.dst, "SELECT 1"); err != nil {
		t.Fatalf("the killed copy did not get as far as creating the target: %v", err)
	}
	m.ok(t, "copy")
	allMatch(t, m.verified(t), seedTables(e)+1)
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("target differs from source after the retried copy")
	}
}

// MigrateViaStore exports to a store, imports, and verifies against the
// inventory the export recorded; a corrupted artifact is refused before the
// target is touched, and a target changed after import is caught.
func MigrateViaStore(t *testing.T, e *Env, kind, changeRow string) {
	st := e.NewStore(t, kind)
	m := newMigration(t, e, "mig_store_"+kind)
	m.env = append(m.env, st.Env...)
	// The target side runs without the source's coordinates (another
	// cluster): only CAIRN_DB_NAME for MySQL's pattern schema.
	targetOnly := []string{"CAIRN_DB_HOST=", "CAIRN_DB_USER=", "CAIRN_DB_PASSWORD="}
	ps := m.ok(t, "precheck-source")
	if ps.Tables != seedTables(e) || ps.SourceVersion == "" || ps.TargetVersion != "" || len(ps.Problems) != 0 {
		t.Errorf("precheck-source: %+v", ps)
	}
	pt := m.ok(t, "precheck-target", targetOnly...)
	if pt.TargetVersion == "" || pt.SourceVersion != "" || len(pt.Problems) != 0 {
		t.Errorf("precheck-target of a missing database: %+v", pt)
	}
	ex := m.ok(t, "export")
	if ex.Artifact == "" || ex.Size <= 0 || !strings.HasPrefix(ex.Checksum, "sha256:") || ex.Tables != seedTables(e) {
		t.Fatalf("export: %+v", ex)
	}
	job := naming.MigrationJob("shop", "mig-store-"+kind)
	key := st.KeyOf(t, job, ex.Artifact)
	exportOutOfBackupJobsReach(t, e, st, m.src, naming.Job{Namespace: "shop", Name: "mig-store-" + kind}, ex.Artifact, key)
	name := key[strings.LastIndex(key, "/")+1:]
	entry, err := catalog.DecodeManifest(st.Read(t, job.ManifestKey(name)), job, job.ManifestKey(name))
	check(t, err)
	if entry.Inventory == nil || len(entry.Inventory.Tables) != seedTables(e) || entry.Inventory.Method != "Checksum" {
		t.Fatalf("manifest inventory: %+v", entry.Inventory)
	}
	if !entry.Inventory.Consistent {
		// PostgreSQL: the dump's exported snapshot; MySQL: the brief
		// global read lock (the test user has RELOAD).
		t.Errorf("export inventory not taken in the dump's snapshot")
	}

	targetOnly = append(targetOnly, "CAIRN_ARTIFACT="+ex.Artifact)
	im := m.ok(t, "import", targetOnly...)
	if im.TablesDone != seedTables(e) {
		t.Errorf("import: %+v", im)
	}
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("imported target differs from source")
	}
	allMatch(t, m.verified(t, targetOnly...), seedTables(e))
	if pt := m.ok(t, "precheck-target", targetOnly...); len(pt.Problems) != seedTables(e) {
		t.Errorf("precheck-target of the imported target: %q", pt.Problems)
	}
	_, err = e.DB.SQL(m.dst, changeRow)
	check(t, err)
	if v := m.verified(t, targetOnly...); v.Mismatched != 1 || v.Items[0].Reason != "content differs" {
		t.Errorf("store verify after a changed row: %+v", v)
	}

	// Corrupt the artifact: import refuses it (exit 3) and leaves the
	// target as it is.
	before := fingerprint(t, e.DB, m.dst)
	data := st.Read(t, key)
	data[len(data)/2] ^= 0xff
	st.Write(t, key, data)
	r := m.run(t, "import", targetOnly...)
	mustExit(t, r, contract.ExitCorrupted)
	if !strings.Contains(r.TermLog, "corrupted") {
		t.Errorf("import of a corrupted artifact: %s", r.TermLog)
	}
	if after := fingerprint(t, e.DB, m.dst); after != before {
		t.Errorf("a refused import changed the target")
	}
}

// exportOutOfBackupJobsReach: a BackupJob named like the MigrationJob (same
// namespace and name, same store) does not see the migration's export: its
// list, restore, prune and delete neither show nor touch it, and its own
// backups land beside it, not among the migration's exports.
func exportOutOfBackupJobsReach(t *testing.T, e *Env, st *Store, db string, bj naming.Job, artifact, key string) {
	t.Helper()
	want := st.Read(t, key)
	if r := e.agent(t, st, db, bj, nil, "list"); r.Code != 0 || strings.TrimSpace(r.Stdout) != "" {
		t.Fatalf("BackupJob %s lists the migration's export: exit %d %q", bj, r.Code, r.Stdout)
	}
	if r := e.agent(t, st, db, bj, []string{"CAIRN_ARTIFACT=" + artifact}, "restore"); r.Code == 0 {
		t.Fatalf("BackupJob %s restored the migration's export %s", bj, artifact)
	}
	if r := e.agent(t, st, db, bj, []string{"CAIRN_RETENTION_DAYS=1"}, "prune"); r.Code != 0 {
		t.Fatalf("prune of BackupJob %s: exit %d %s", bj, r.Code, r.Stderr)
	}
	if r := e.agent(t, st, db, bj, nil, "delete"); r.Code != 0 {
		t.Fatalf("delete of BackupJob %s: exit %d %s", bj, r.Code, r.Stderr)
	}
	if got := st.Read(t, key); !bytes.Equal(got, want) {
		t.Fatalf("the export changed after BackupJob %s's prune and delete", bj)
	}
	if keys := st.Keys(t, bj); len(keys) != 0 {
		t.Fatalf("BackupJob %s's directory holds %v", bj, keys)
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

// MigrateUsage: bad configuration exits 2 with a one-line reason, and no
// credential is printed on any path.
func MigrateUsage(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_usage")
	for _, tc := range []struct {
		step  string
		extra []string
		want  string
	}{
		{"nonsense", nil, "unknown migrate step"},
		{"copy", []string{"CAIRN_TARGET_DB_HOST="}, "CAIRN_TARGET_DB_HOST"},
		{"copy", []string{"CAIRN_MIGRATE_MODE=Sometimes"}, "mode"},
		{"verify", []string{"CAIRN_MIGRATE_VERIFY=Maybe"}, "verify"},
		{"export", nil, "needs a store"},
		{"copy", []string{"CAIRN_MIGRATE_INCLUDE=nosuch.table"}, "no table"},
	} {
		r := m.run(t, tc.step, tc.extra...)
		mustExit(t, r, contract.ExitUsage)
		if !strings.Contains(r.TermLog, tc.want) {
			t.Errorf("%s %v: %s, want %q", tc.step, tc.extra, r.TermLog, tc.want)
		}
	}
	// A wrong target password is a retryable failure (exit 1), redacted.
	r := m.run(t, "precheck", "CAIRN_TARGET_DB_PASSWORD=wrong-"+DBPassword)
	mustExit(t, r, contract.ExitFailure)
	noSecrets(t, r, "wrong-"+DBPassword)
}

// BackupInventory: a backup's manifest lists the tables with the rows the
// database has.
func BackupInventory(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "inv_backup"
	job := naming.Job{Namespace: "shop", Name: "inv"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	// Values that could fool a count read from the dump stream:
	// parentheses and row separators in strings, doubled quotes, a
	// trailing backslash (MySQL: one escaped backslash), a raw newline.
	_, err := e.DB.SQL(db, `CREATE TABLE tricky (id int PRIMARY KEY, s varchar(100), b varchar(20));
INSERT INTO tricky VALUES (1, 'a),(b', 'x'), (2, 'it''s (', NULL), (3, 'back\\', ')'), (4, 'two
lines ),( here', ''), (5, '''', '(');`)
	check(t, err)
	tables := seedTables(e) + 1
	// The default (RowCount: what a RestoreJob's checks compare), then
	// CAIRN_INVENTORY=Checksum (row counts and content checksums).
	for _, c := range []struct {
		env    []string
		method string
		sumLen int
	}{{nil, "RowCount", 0}, {[]string{"CAIRN_INVENTORY=Checksum"}, "Checksum", 16}} {
		run := e.agent(t, st, db, job, c.env, "backup")
		res := mustSucceed(t, run)
		// Row counts come from the dump stream itself (PostgreSQL's
		// archive, mysqldump's INSERTs); the agent logs when it has to
		// count with count(*) instead.
		if strings.Contains(run.Stderr, "count(*)") {
			t.Errorf("backup (%s) fell back to count(*): %s", c.method, run.Stderr)
		}
		key := st.KeyOf(t, job, res.Artifact)
		name := key[strings.LastIndex(key, "/")+1:]
		raw := st.Read(t, job.ManifestKey(name))
		entry, err := catalog.DecodeManifest(raw, job, job.ManifestKey(name))
		check(t, err)
		if entry.Inventory == nil || len(entry.Inventory.Tables) != tables || string(entry.Inventory.Method) != c.method {
			t.Fatalf("manifest (%s): %s", c.method, raw)
		}
		for _, tb := range entry.Inventory.Tables {
			want, err := e.DB.SQL(db, "SELECT COUNT(*) FROM "+tb.Name)
			check(t, err)
			if itoa(int(tb.Rows)) != strings.TrimSpace(want) || len(tb.Checksum) != c.sumLen {
				t.Errorf("inventory (%s) %+v, database has %s rows", c.method, tb, want)
			}
		}
	}
	// CAIRN_INVENTORY=None: no inventory; old manifests without one parse.
	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_INVENTORY=None"}, "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	name := key[strings.LastIndex(key, "/")+1:]
	raw := st.Read(t, job.ManifestKey(name))
	var probe map[string]any
	check(t, json.Unmarshal(raw, &probe))
	if _, ok := probe["inventory"]; ok {
		t.Errorf("CAIRN_INVENTORY=None manifest has an inventory: %s", raw)
	}
	_ = os.Getenv
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

// BackupLockBrief (MySQL): the global read lock that lines the inventory's
// snapshot up with mysqldump's is released once mysqldump started, not
// held for the dump: a write succeeds while a stalled backup is mid-dump,
// and the inventory is still Consistent.
func BackupLockBrief(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "lock_brief"
	job := naming.Job{Namespace: "shop", Name: "lock"}
	check(t, e.DB.Seed(db))
	check(t, e.DB.SeedBig(db, 16))
	t.Cleanup(func() { e.DB.Drop(db) })
	proxy, err := testenv.NewStallProxy("127.0.0.1:"+itoa(e.DB.Port()), 8<<20)
	check(t, err)
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String(), "CAIRN_DB_PORT="+itoa(proxy.Port()))
	cmd, _, err := e.Agent.Command(ctx, env, "backup")
	check(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-proxy.Stalled():
	case err := <-exited:
		t.Fatalf("backup ended before the proxy stalled it (%v): %s", err, stderr.String())
	}
	// The server is reached directly here, not through the proxy.
	done := make(chan error, 1)
	go func() {
		_, err := e.DB.SQL(db, "SET SESSION lock_wait_timeout = 5; INSERT INTO orders (customer_id, total) VALUES (1, 2)")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("a write during the backup's dump: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("a write during the backup's dump did not finish in 30 s")
	}
	check(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	proxy.Close()
	t.Logf("agent log:\n%s", lastLines(stderr.String(), 8))
}
