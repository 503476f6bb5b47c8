package checks_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/checks"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/test/suite"
)

// server is one real server the queriers run against.
type server struct {
	q   checks.Querier
	sql func(db, sql string) (string, error)
}

func startPostgres(t *testing.T, db string) server {
	const pw = "pw-checks-test-1234"
	pg, err := testenv.StartPostgres(pw)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Stop)
	if _, err := pg.SQL("postgres", "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	c := engine.Conn{Host: "127.0.0.1", Port: pg.Port, User: pg.User, Password: pw, Database: db}
	return server{q: &checks.Postgres{Conn: c, Timeout: 2 * time.Second}, sql: pg.SQL}
}

func startMariaDB(t *testing.T, db string) server {
	const pw = "pw-checks-test-1234"
	my, err := testenv.StartMariaDB("cairn", pw)
	if err != nil {
		t.Fatalf("MariaDB: %v", err)
	}
	t.Cleanup(my.Stop)
	if _, err := my.SQL("", "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	c := engine.Conn{Host: "127.0.0.1", Port: my.Port, User: "cairn", Password: pw, Database: db}
	return server{q: &checks.MySQL{Conn: c, Timeout: 2 * time.Second}, sql: my.SQL}
}

// TestQueryValue runs checks' queries against real PostgreSQL and MariaDB
// servers: one value as text, every other shape a clear error, nothing
// written, a query past the timeout stopped on the server, and a result
// too large or too long cut short.
func TestQueryValue(t *testing.T) {
	for name, start := range map[string]func(*testing.T, string) server{"postgres": startPostgres, "mysql": startMariaDB} {
		t.Run(name, func(t *testing.T) {
			s := start(t, "chk")
			ctx := context.Background()
			if _, err := s.sql("chk", "CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2), (3)"); err != nil {
				t.Fatal(err)
			}
			for q, want := range map[string]string{
				"SELECT count(*) FROM t": "3", "select 'a,b\"c'": `a,b"c`, "SELECT NULL": "NULL",
				"select 'x\ty'": "x\ty", "select 'line\nbreak'": "line\nbreak", "SELECT count(*) FROM t;": "3",
				"-- a comment\nSELECT max(id) FROM t": "3", "(SELECT 7)": "7", "WITH c AS (SELECT 5 AS v) SELECT v FROM c": "5",
			} {
				if got, err := s.q.QueryValue(ctx, q); err != nil || got != want {
					t.Errorf("QueryValue(%q) = %q, %v; want %q", q, got, err, want)
				}
			}
			errs := map[string]string{
				"SELECT id FROM t":              "more than one row",
				"SELECT 1, 2":                   "2 columns",
				"SELECT id FROM t WHERE id > 5": "no row",
				"DELETE FROM t":                 "",
				"SELECT * FROM missing_table":   "missing_table",
				"":                              "empty",
				"SELECT 1; SELECT 2":            "",
			}
			if name == "postgres" {
				errs["SELECT pg_sleep(1e6)"] = "statement timeout"
				errs["SELECT repeat('x', 2000000)"] = "larger than"
				errs["SELECT $1::int"] = ""
			} else {
				errs["SELECT SLEEP(1000000)"] = "max_statement_time"
			}
			// 3^15 rows, streamed: the second one stops the query.
			errs["SELECT 1 FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l, t m, t n, t o"] = "more than one row"
			for q, want := range errs {
				start := time.Now()
				got, err := s.q.QueryValue(ctx, q)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("QueryValue(%q) = %q, %v; want an error containing %q", q, got, err, want)
				}
				t.Logf("%q: %v (%s)", q, err, time.Since(start).Round(time.Millisecond))
			}
			if out, _ := s.sql("chk", "SELECT count(*) FROM t"); strings.TrimSpace(out) != "3" {
				t.Errorf("a check wrote: %s rows left", out)
			}
		})
	}
}

// TestHostileQueries runs the data-path suite's hostile checks directly
// against the queriers on real servers (superuser / ALL PRIVILEGES, the
// worst case): each fails with its message, and nothing is written — no
// row, no file on the server or here, no replication slot.
func TestHostileQueries(t *testing.T) {
	for name, start := range map[string]func(*testing.T, string) server{"postgres": startPostgres, "mysql": startMariaDB} {
		t.Run(name, func(t *testing.T) {
			s := start(t, "chk")
			if _, err := s.sql("chk", "CREATE TABLE orders (id int); INSERT INTO orders VALUES (1), (2);\n"+suite.HostileCheckSetup(name)); err != nil {
				t.Fatal(err)
			}
			dir, err := os.MkdirTemp("", "cairn-hostile-queries-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			for _, h := range suite.HostileCheckList(name, dir) {
				got, err := s.q.QueryValue(context.Background(), h.SQL)
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(h.Want)) {
					t.Errorf("%s (%q) = %q, %v; want an error containing %q", h.Name, h.SQL, got, err, h.Want)
				}
				t.Logf("%s: %v", h.Name, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("the checks wrote %d file(s) in %s", len(entries), dir)
			}
			for q, want := range map[string]string{"SELECT COUNT(*) FROM orders": "2", "SELECT COUNT(*) FROM check_log": "0"} {
				if got, err := s.sql("chk", q); err != nil || strings.TrimSpace(got) != want {
					t.Errorf("%s = %q, %v; want %s (a check wrote)", q, got, err, want)
				}
			}
			if name == "postgres" {
				if got, err := s.sql("postgres", "SELECT count(*) FROM pg_replication_slots"); err != nil || strings.TrimSpace(got) != "0" {
					t.Errorf("replication slots: %q, %v; want none", got, err)
				}
			}
		})
	}
}
