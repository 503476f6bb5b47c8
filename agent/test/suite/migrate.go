package suite

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/contract"
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
