package migrate

import (
	"context"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
)

// TestMyCopyTableStrictAndExact copies one table between two databases of a
// real MariaDB server, as the Full copy's workers do (myPrepareTarget, then
// myCopyTable): into a pre-created target whose column is narrower than the
// source's, the copy fails instead of truncating the value with a warning;
// into one that fits, FLOAT and DOUBLE values arrive exactly (a FLOAT's own
// text has 6 significant digits).
func TestMyCopyTableStrictAndExact(t *testing.T) {
	const pw = "mycopy-PASSWORD-5e1f"
	my, err := testenv.StartMariaDB("cairn", pw)
	if err != nil {
		t.Fatalf("MariaDB test server: %v", err)
	}
	t.Cleanup(my.Stop)
	sql := func(db, q string) string {
		t.Helper()
		out, err := my.SQL(db, q)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	sql("", "CREATE DATABASE src; CREATE DATABASE narrow; CREATE DATABASE wide")
	sql("src", `CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), f FLOAT, d DOUBLE, g FLOAT(7,2));
INSERT INTO t VALUES (1, 'a value much longer than five', 1.0000001, 0.1e0 + 0.2e0, 12.345678), (2, 'ok', 16777217, 1e-300, -0.5)`)
	sql("narrow", `CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5), f FLOAT, d DOUBLE, g FLOAT(7,2))`)
	sql("wide", `CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), f FLOAT, d DOUBLE, g FLOAT(7,2))`)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := func(db string) engine.Conn {
		return engine.Conn{Host: "127.0.0.1", Port: my.Port, Database: db, User: "cairn", Password: pw}
	}
	copyInto := func(dst string) error {
		spool, s, err := myConnectTarget(ctx, conn("src"))
		if err != nil {
			t.Fatal(err)
		}
		defer spool.Close()
		defer s.Close()
		if _, err := s.ExecContext(ctx, "SET SESSION character_set_results = binary"); err != nil {
			t.Fatal(err)
		}
		tpool, tc, err := myConnectTarget(ctx, conn(dst))
		if err != nil {
			t.Fatal(err)
		}
		defer tpool.Close()
		defer tc.Close()
		maxStmt, err := myPrepareTarget(ctx, tc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = myCopyTable(ctx, s, tc, "t", maxStmt)
		return err
	}

	err = copyInto("narrow")
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("copy into a narrower column: %v, want a 'Data too long' failure", err)
	}
	if got := sql("narrow", "SELECT count(*) FROM t WHERE v = 'a val'"); got != "0" {
		t.Errorf("the target holds %s truncated value(s)", got)
	}

	if err := copyInto("wide"); err != nil {
		t.Fatalf("copy into a target that fits: %v", err)
	}
	exact := "SELECT id, v, f + 0e0, d + 0e0, g + 0e0 FROM t ORDER BY id"
	if src, dst := sql("src", exact), sql("wide", exact); src != dst {
		t.Errorf("values changed by the copy:\nsource %q\ntarget %q", src, dst)
	}
}
