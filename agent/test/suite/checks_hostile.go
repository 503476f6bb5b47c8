package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/result"
)

// hostileCheck is a check a user (or a mistake) could write that must not
// run anything but one read-only query: want is in its failure message.
type hostileCheck struct {
	name, sql, want string
}

// hostileChecks are the engine's hostile checks. dir is a folder both the
// agent and the database server can write to: nothing may appear in it.
func hostileChecks(engine, dir string) []hostileCheck {
	f := func(name string) string { return filepath.Join(dir, name) }
	common := []hostileCheck{
		{"shell", `\! id > ` + f("shell") + `; env > ` + f("env"), ""},
		{"shell-select", `\! sh -c 'id > ` + f("shell2") + `'`, ""},
		{"delete", "DELETE FROM orders", ""},
		{"write-cte", "WITH d AS (DELETE FROM orders RETURNING 1) SELECT count(*) FROM d", ""},
		{"writes-through-function", "SELECT cairn_writes()", "read"},
		{"sleep", "", "time"},
	}
	if engine == "postgres" {
		common[5].sql = "SELECT pg_sleep(1e6)"
		return append(common,
			hostileCheck{"set-then-delete", "SET transaction_read_only = off; DELETE FROM orders", ""},
			hostileCheck{"set-read-write", "SET transaction_read_only = off", "no rows"},
			hostileCheck{"set-characteristics", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "no rows"},
			hostileCheck{"commit", "COMMIT", "no rows"},
			hostileCheck{"commit-then-delete", "COMMIT; DELETE FROM orders", ""},
			hostileCheck{"copy-to-program", "COPY (SELECT 1) TO PROGRAM 'id > " + f("copy") + "'", "no rows"},
			hostileCheck{"lo-export", "SELECT lo_export(424242, '" + f("lo") + "')", "lo_export"},
			hostileCheck{"lo-export-quoted", `SELECT "lo_export"(424242, '` + f("lo2") + `')`, "lo_export"},
			hostileCheck{"query-to-xml", "SELECT query_to_xml('select lo_export(424242, ''" + f("lo3") + "'')', true, false, '')", "refused"},
			hostileCheck{"slot", "SELECT pg_create_physical_replication_slot('cairn_check_slot')", "refused"},
			hostileCheck{"do", "DO $$BEGIN DELETE FROM orders; END$$", ""},
		)
	}
	common[5].sql = "SELECT SLEEP(1000000)"
	return append(common,
		hostileCheck{"set-then-delete", "SET SESSION TRANSACTION READ WRITE; DELETE FROM orders", ""},
		hostileCheck{"set-read-write", "SET SESSION TRANSACTION READ WRITE", "refused"},
		hostileCheck{"commit", "COMMIT", "refused"},
		hostileCheck{"outfile", "SELECT COUNT(*) FROM orders INTO OUTFILE '" + f("outfile") + "'", "OUTFILE"},
		hostileCheck{"dumpfile", "SELECT 'x' INTO DUMPFILE '" + f("dumpfile") + "'", "DUMPFILE"},
		hostileCheck{"do", "DO cairn_writes()", "refused"},
		hostileCheck{"drop", "DROP TABLE check_log", "refused"},
		hostileCheck{"executable-comment", "SELECT 1 /*!, (SELECT cairn_writes()) */", "executable"},
	)
}

// HostileChecks restores a backup with checks that try to write, to run a
// program or a shell, to write a file on the server, to outlive the
// transaction or to run forever (with a short CAIRN_CHECK_TIMEOUT): every
// one fails with a message, none has an effect, and every check is
// reported, the harmless one after them passing.
func HostileChecks(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	src, scratch := "hchk_src_"+kind, "hchk_scratch_"+kind
	job := naming.Job{Namespace: "shop", Name: "hostile-checks-" + kind}
	check(t, e.DB.Seed(src))
	t.Cleanup(func() {
		e.DB.Drop(src)
		e.DB.Drop(scratch)
	})
	// A table a function writes to, and (PostgreSQL) a large object: both
	// are in the backup, so in the restored database.
	if e.DB.Engine() == "postgres" {
		_, err := e.DB.SQL(src, `CREATE TABLE check_log (v int);
CREATE FUNCTION cairn_writes() RETURNS int LANGUAGE plpgsql AS $$BEGIN INSERT INTO check_log VALUES (1); RETURN 1; END$$;
SELECT lo_from_bytea(424242, 'large object');`)
		check(t, err)
	} else {
		_, err := e.DB.SQL(src, "CREATE TABLE check_log (v INT);\nDELIMITER //\n"+
			"CREATE FUNCTION cairn_writes() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO check_log VALUES (1); RETURN 1; END//\nDELIMITER ;\n")
		check(t, err)
	}
	orders, err := e.DB.SQL(src, "SELECT COUNT(*) FROM orders")
	check(t, err)
	mustSucceed(t, e.agent(t, st, src, job, nil, "backup"))

	// A folder the database server (another user) could write to too.
	dir, err := os.MkdirTemp("", "cairn-hostile-checks-")
	check(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	check(t, os.Chmod(dir, 0o777))

	hs := hostileChecks(e.DB.Engine(), dir)
	var cs []result.Check
	for _, h := range hs {
		cs = append(cs, result.Check{Name: h.name, SQL: h.sql, AtLeast: ptr(int64(0))})
	}
	cs = append(cs, result.Check{Name: "orders-after", SQL: "SELECT COUNT(*) FROM orders", Equals: ptr(orders)})
	env := append(checksEnv(t, cs, false), "CAIRN_CHECK_TIMEOUT=2s")
	rr := e.agent(t, st, scratch, job, env, "restore")
	r := mustSucceed(t, rr)
	noSecrets(t, rr)

	if len(r.Checks) != len(cs) {
		t.Fatalf("%d check results, want %d (every check reported): %+v", len(r.Checks), len(cs), r.Checks)
	}
	for i, h := range hs {
		c := r.Checks[i]
		if c.Name != h.name || c.Passed || c.Message == "" || !strings.Contains(strings.ToLower(c.Message), strings.ToLower(h.want)) {
			t.Errorf("check %s (%q) = %+v; want failed, with a message containing %q", h.name, h.sql, c, h.want)
		}
		for _, leak := range []string{"uid=", S3SecretKey, S3AccessKey, "AWS_"} {
			if strings.Contains(c.Value+c.Message, leak) {
				t.Errorf("check %s reports %q: %+v", h.name, leak, c)
			}
		}
	}
	if last := r.Checks[len(cs)-1]; !last.Passed || last.Value != orders {
		t.Errorf("the harmless check after the hostile ones = %+v; want passed with %s", last, orders)
	}
	entries, err := os.ReadDir(dir)
	check(t, err)
	for _, de := range entries {
		t.Errorf("a check wrote %s", filepath.Join(dir, de.Name()))
	}
	for q, want := range map[string]string{"SELECT COUNT(*) FROM orders": orders, "SELECT COUNT(*) FROM check_log": "0"} {
		if got, err := e.DB.SQL(scratch, q); err != nil || got != want {
			t.Errorf("%s in the restored database = %q, %v; want %s (a check wrote)", q, got, err, want)
		}
	}
	if e.DB.Engine() == "postgres" {
		if got, err := e.DB.SQL("postgres", "SELECT count(*) FROM pg_replication_slots"); err != nil || got != "0" {
			t.Errorf("replication slots after the checks: %q, %v; want none", got, err)
		}
	}
}
