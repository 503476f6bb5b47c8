package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
)

// HostileCheck is a check a user (or a mistake) could write that must not
// run anything but one read-only query: Want is in its failure message.
type HostileCheck struct {
	Name, SQL, Want string
}

// HostileCheckSetup creates, in a database, what the hostile checks reach
// for: a table check_log that the function cairn_writes() writes to, and
// (PostgreSQL) the large object 424242.
func HostileCheckSetup(engine string) string {
	if engine == "postgres" {
		return `CREATE TABLE check_log (v int);
CREATE FUNCTION cairn_writes() RETURNS int LANGUAGE plpgsql AS $$BEGIN INSERT INTO check_log VALUES (1); RETURN 1; END$$;
SELECT lo_from_bytea(424242, 'large object');`
	}
	return "CREATE TABLE check_log (v INT);\nDELIMITER //\n" +
		"CREATE FUNCTION cairn_writes() RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO check_log VALUES (1); RETURN 1; END//\nDELIMITER ;\n"
}

// HostileCheckList is the engine's hostile checks, in a database with an
// orders table and HostileCheckSetup. dir is a folder both the agent and
// the database server can write to: nothing may appear in it.
func HostileCheckList(engine, dir string) []HostileCheck {
	f := func(name string) string { return filepath.Join(dir, name) }
	common := []HostileCheck{
		{"shell", `\! id > ` + f("shell") + `; env > ` + f("env"), ""},
		{"shell-select", `\! sh -c 'id > ` + f("shell2") + `'`, ""},
		{"delete", "DELETE FROM orders", ""},
		{"write-cte", "WITH d AS (DELETE FROM orders RETURNING 1) SELECT count(*) FROM d", ""},
		{"writes-through-function", "SELECT cairn_writes()", "read"},
		{"sleep", "", "time"},
	}
	if engine == "postgres" {
		common[5].SQL = "SELECT pg_sleep(1e6)"
		return append(common,
			HostileCheck{"set-then-delete", "SET transaction_read_only = off; DELETE FROM orders", ""},
			HostileCheck{"set-read-write", "SET transaction_read_only = off", "no rows"},
			HostileCheck{"set-characteristics", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "no rows"},
			HostileCheck{"reset", "RESET ALL", "no rows"},
			HostileCheck{"commit", "COMMIT", "no rows"},
			HostileCheck{"commit-then-delete", "COMMIT; DELETE FROM orders", ""},
			HostileCheck{"copy-to-program", "COPY (SELECT 1) TO PROGRAM 'id > " + f("copy") + "'", "no rows"},
			HostileCheck{"lo-export", "SELECT lo_export(424242, '" + f("lo") + "')", "lo_export"},
			HostileCheck{"lo-export-quoted", `SELECT "lo_export"(424242, '` + f("lo2") + `')`, "lo_export"},
			HostileCheck{"query-to-xml", "SELECT query_to_xml('select lo_export(424242, ''" + f("lo3") + "'')', true, false, '')", "refused"},
			HostileCheck{"slot", "SELECT pg_create_physical_replication_slot('cairn_check_slot')", "refused"},
			HostileCheck{"do", "DO $$BEGIN DELETE FROM orders; END$$", ""},
		)
	}
	common[5].SQL = "SELECT SLEEP(1000000)"
	return append(common,
		HostileCheck{"set-then-delete", "SET SESSION TRANSACTION READ WRITE; DELETE FROM orders", ""},
		HostileCheck{"set-read-write", "SET SESSION TRANSACTION READ WRITE", "refused"},
		HostileCheck{"commit", "COMMIT", "refused"},
		HostileCheck{"outfile", "SELECT COUNT(*) FROM orders INTO OUTFILE '" + f("outfile") + "'", "OUTFILE"},
		HostileCheck{"dumpfile", "SELECT 'x' INTO DUMPFILE '" + f("dumpfile") + "'", "DUMPFILE"},
		HostileCheck{"do", "DO cairn_writes()", "refused"},
		HostileCheck{"drop", "DROP TABLE check_log", "refused"},
		HostileCheck{"executable-comment", "SELECT 1 /*!, (SELECT cairn_writes()) */", "executable"},
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
	_, err := e.DB.SQL(src, HostileCheckSetup(e.DB.Engine()))
	check(t, err)
	orders, err := e.DB.SQL(src, "SELECT COUNT(*) FROM orders")
	check(t, err)
	mustSucceed(t, e.agent(t, st, src, job, nil, "backup"))

	// A folder the database server (another user) could write to too.
	dir, err := os.MkdirTemp("", "cairn-hostile-checks-")
	check(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	check(t, os.Chmod(dir, 0o777))

	hs := HostileCheckList(e.DB.Engine(), dir)
	var cs []contract.Check
	for _, h := range hs {
		cs = append(cs, contract.Check{Name: h.Name, SQL: h.SQL, AtLeast: ptr(int64(0))})
	}
	cs = append(cs, contract.Check{Name: "orders-after", SQL: "SELECT COUNT(*) FROM orders", Equals: ptr(orders)})
	env := append(checksEnv(t, cs, false), "CAIRN_CHECK_TIMEOUT=2s")
	rr := e.agent(t, st, scratch, job, env, "restore")
	r := mustSucceed(t, rr)
	noSecrets(t, rr)

	if len(r.Checks) != len(cs) {
		t.Fatalf("%d check results, want %d (every check reported): %+v", len(r.Checks), len(cs), r.Checks)
	}
	for i, h := range hs {
		c := r.Checks[i]
		if c.Name != h.Name || c.Passed || c.Message == "" || !strings.Contains(strings.ToLower(c.Message), strings.ToLower(h.Want)) {
			t.Errorf("check %s (%q) = %+v; want failed, with a message containing %q", h.Name, h.SQL, c, h.Want)
		}
		for _, leak := range []string{"uid=", S3SecretKey, S3AccessKey, "AWS_"} {
			if strings.Contains(c.Value+c.Message, leak) {
				t.Errorf("check %s reports %q: %+v", h.Name, leak, c)
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
