package suite

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/backup"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
)

// dbExists reports whether database name exists on the test server.
func dbExists(t *testing.T, e *Env, name string) bool {
	t.Helper()
	var out string
	var err error
	if e.DB.Engine() == "postgres" {
		out, err = e.DB.SQL("postgres", fmt.Sprintf("SELECT count(*) FROM pg_database WHERE datname = '%s'", name))
	} else {
		out, err = e.DB.SQL("", fmt.Sprintf("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '%s'", name))
	}
	check(t, err)
	return strings.TrimSpace(out) == "1"
}

func checksEnv(t *testing.T, cs []contract.Check, drop bool) []string {
	t.Helper()
	b, err := json.Marshal(cs)
	check(t, err)
	return []string{contract.EnvChecks + "=" + string(b), fmt.Sprintf("%s=%v", contract.EnvDropTargetAfterChecks, drop)}
}

func byName(rs []contract.CheckResult) map[string]contract.CheckResult {
	m := map[string]contract.CheckResult{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

func ptr[T any](v T) *T { return &v }

// Checks restores a backup into a scratch database with checks and the
// drop asked for: every check is reported (passing, failing, erroring),
// the checks are read-only, the scratch database is dropped after them
// because the restore created it, and a database that existed before is
// never dropped.
func Checks(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	src, scratch, existing, ro := "chk_src_"+kind, "chk_scratch_"+kind, "chk_existing_"+kind, "chk_ro_"+kind
	job := naming.Job{Namespace: "shop", Name: "checks-" + kind}
	check(t, e.DB.Seed(src))
	t.Cleanup(func() {
		for _, db := range []string{src, scratch, existing, ro} {
			e.DB.Drop(db)
		}
	})
	orders, err := e.DB.SQL(src, "SELECT COUNT(*) FROM orders")
	check(t, err)
	before := fingerprint(t, e.DB, src)
	mustSucceed(t, e.agent(t, st, src, job, nil, "backup"))

	cs := []contract.Check{
		{Name: "orders-exact", SQL: "SELECT COUNT(*) FROM orders", Equals: ptr(orders)},
		{Name: "customers-some", SQL: "select count(*) from customers;", AtLeast: ptr(int64(1))},
		{Name: "orders-few", SQL: "SELECT COUNT(*) FROM orders", AtMost: ptr(int64(10))},
		{Name: "no-table", SQL: "SELECT COUNT(*) FROM no_such_table", AtLeast: ptr(int64(0))},
		{Name: "many-rows", SQL: "SELECT id FROM customers", AtLeast: ptr(int64(0))},
		{Name: "not-number", SQL: "SELECT 'abc'", AtLeast: ptr(int64(0))},
		{Name: "null", SQL: "SELECT NULL", Equals: ptr("NULL")},
		{Name: "row-counts", RowCountsMatchBackup: true},
	}
	if dbExists(t, e, scratch) {
		t.Fatalf("%s exists before the test", scratch)
	}
	r := mustSucceed(t, e.agent(t, st, scratch, job, checksEnv(t, cs, true), "restore"))
	if len(r.Checks) != len(cs) {
		t.Fatalf("%d check results, want %d: %+v", len(r.Checks), len(cs), r.Checks)
	}
	for i, c := range r.Checks {
		if c.Name != cs[i].Name {
			t.Errorf("result %d is %q, want %q (in the order given)", i, c.Name, cs[i].Name)
		}
	}
	got := byName(r.Checks)
	for _, want := range []struct {
		name   string
		passed bool
		value  string
		msg    string
	}{
		{"orders-exact", true, orders, ""},
		{"customers-some", true, "3000", ""},
		{"orders-few", false, orders, "is more than 10"},
		{"no-table", false, "", "no_such_table"},
		{"many-rows", false, "", "more than one row"},
		{"not-number", false, "abc", "not a number"},
		{"null", true, "NULL", ""},
		{"row-counts", true, "table(s)", ""},
	} {
		c := got[want.name]
		if c.Passed != want.passed || c.Value != want.value && !(want.name == "row-counts" && strings.Contains(c.Value, want.value)) || !strings.Contains(c.Message, want.msg) || want.passed && c.Message != "" {
			t.Errorf("check %s = %+v; want passed=%v value=%q message containing %q", want.name, c, want.passed, want.value, want.msg)
		}
	}
	if !r.TargetCreated || !r.TargetDropped || r.DropError != "" {
		t.Errorf("targetCreated=%v targetDropped=%v dropError=%q; want created and dropped", r.TargetCreated, r.TargetDropped, r.DropError)
	}
	if dbExists(t, e, scratch) {
		t.Errorf("scratch database %s still exists after the restore dropped it", scratch)
	}
	if !dbExists(t, e, src) || fingerprint(t, e.DB, src) != before {
		t.Fatalf("the source database %s changed", src)
	}

	// A database that existed before the restore is never dropped, even
	// when asked to.
	check(t, e.DB.Create(existing))
	r = mustSucceed(t, e.agent(t, st, existing, job, checksEnv(t, cs[:1], true), "restore"))
	if r.TargetCreated || r.TargetDropped || !strings.Contains(r.DropError, "existed before") {
		t.Errorf("existing target: created=%v dropped=%v dropError=%q; want neither, with the reason", r.TargetCreated, r.TargetDropped, r.DropError)
	}
	if !dbExists(t, e, existing) || fingerprint(t, e.DB, existing) != before {
		t.Errorf("the existing target %s was dropped or not restored", existing)
	}

	// Checks run read-only: a check that writes fails and writes nothing.
	// Without the drop flag the new database stays, unmarked.
	writes := []contract.Check{{Name: "writes", SQL: "DELETE FROM orders", AtLeast: ptr(int64(0))}}
	r = mustSucceed(t, e.agent(t, st, ro, job, checksEnv(t, writes, false), "restore"))
	if len(r.Checks) != 1 || r.Checks[0].Passed || r.TargetDropped || !r.TargetCreated {
		t.Errorf("write check: %+v created=%v dropped=%v; want a failed check, the target created and kept", r.Checks, r.TargetCreated, r.TargetDropped)
	}
	if !dbExists(t, e, ro) || fingerprint(t, e.DB, ro) != before {
		t.Errorf("a check wrote to %s", ro)
	}

	// No checks, no drop: the result has none of the new fields.
	rr := e.agent(t, st, ro, job, nil, "restore")
	mustSucceed(t, rr)
	for _, f := range []string{`"checks"`, `"targetDropped"`, `"dropError"`} {
		if strings.Contains(rr.TermLog, f) {
			t.Errorf("a restore without checks reports %s: %s", f, rr.TermLog)
		}
	}

	// Row counts are compared with what the backup recorded in its
	// manifest: one more order recorded than restored fails the check.
	key := st.KeyOf(t, job, r.Artifact)
	name := path.Base(key)
	raw := st.Read(t, job.ManifestKey(name))
	entry, err := catalog.DecodeManifest(raw, job, job.ManifestKey(name))
	check(t, err)
	if entry.Inventory == nil {
		t.Fatalf("the backup recorded no inventory: %s", raw)
	}
	tampered := false
	for i, tb := range entry.Inventory.Tables {
		if tb.Name == "orders" {
			entry.Inventory.Tables[i].Rows++
			tampered = true
		}
	}
	if !tampered {
		t.Fatalf("no orders table in the inventory: %s", raw)
	}
	b, err := catalog.EncodeManifest(job, entry)
	check(t, err)
	st.Write(t, job.ManifestKey(name), b)
	r = mustSucceed(t, e.agent(t, st, scratch, job, checksEnv(t, cs[len(cs)-1:], true), "restore"))
	if len(r.Checks) != 1 || r.Checks[0].Passed || !strings.Contains(r.Checks[0].Message, "orders: "+orders+" restored, ") ||
		!strings.Contains(r.Checks[0].Message, "1 table(s) differ") {
		t.Errorf("row counts against a tampered record: %+v", r.Checks)
	}
	if !r.TargetDropped || dbExists(t, e, scratch) {
		t.Errorf("the scratch database was not dropped after a failed check")
	}

	// Bad checks are a usage error: nothing is restored.
	bad := e.agent(t, st, scratch, job, []string{contract.EnvChecks + `=[{"name":"x","sql":"select 1"}]`}, "restore")
	mustExit(t, bad, contract.ExitUsage)
	if dbExists(t, e, scratch) {
		t.Errorf("a restore with invalid checks created %s", scratch)
	}

	if e.DB.Engine() == "postgres" {
		// A scratch database left by an earlier attempt of a restore from
		// the same catalog key carries the marker: it is the restore's own
		// and is dropped after the checks.
		check(t, e.DB.Create(scratch))
		_, err := e.DB.SQL("postgres", fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", scratch, backup.ScratchMarker(job)))
		check(t, err)
		r = mustSucceed(t, e.agent(t, st, scratch, job, checksEnv(t, cs[:1], true), "restore"))
		if !r.TargetCreated || !r.TargetDropped || dbExists(t, e, scratch) {
			t.Errorf("marked scratch database: created=%v dropped=%v dropError=%q exists=%v; want dropped",
				r.TargetCreated, r.TargetDropped, r.DropError, dbExists(t, e, scratch))
		}
		// A marker of another catalog key is not.
		check(t, e.DB.Create(scratch))
		other := naming.Job{Namespace: "shop", Name: "other"}
		_, err = e.DB.SQL("postgres", fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", scratch, backup.ScratchMarker(other)))
		check(t, err)
		r = mustSucceed(t, e.agent(t, st, scratch, job, checksEnv(t, cs[:1], true), "restore"))
		if r.TargetCreated || r.TargetDropped || !dbExists(t, e, scratch) {
			t.Errorf("database marked for %s: created=%v dropped=%v; want kept", other, r.TargetCreated, r.TargetDropped)
		}
	}
}
