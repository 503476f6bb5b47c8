package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestCheckSQL(t *testing.T) {
	pg, my := cairnv1.PostgresEngine, cairnv1.MySQLEngine
	p := field.NewPath("spec", "checks").Index(2).Child("sql")
	for _, tt := range []struct {
		engine cairnv1.DatabaseEngine
		sql    string
		want   string // "" accepted, else in the message
	}{
		{pg, "SELECT count(*) FROM orders", ""},
		{pg, "select count(*) from orders;", ""},
		{pg, "SELECT count(*) FROM orders; -- the end\n", ""},
		{pg, "SELECT count(*) FROM orders;  /* done */ ", ""},
		{pg, "  (SELECT 1)", ""},
		{pg, "WITH x AS (SELECT 1) SELECT * FROM x", ""},
		{pg, "VALUES (1)", ""},
		{pg, "TABLE orders", ""},
		{pg, "SHOW server_version", ""},
		{pg, "SELECT 'a;b'", ""},
		{pg, "SELECT 'it''s; \\ here'", ""},
		{pg, `SELECT E'it\'s; x'`, ""},
		{pg, `SELECT "we;ird"."col\" FROM t`, ""},
		{pg, "SELECT $$a;b$$ || $tag$ c; $$ $tag$", ""},
		{pg, "SELECT 1 /* a /* nested ; */ comment ; */", ""},
		{pg, "-- note; here\nSELECT 1", ""},
		{pg, "SELECT a$b FROM t", ""},
		{pg, "SELECT 1 -- trailing", ""},
		{my, "SELECT COUNT(*) FROM `or;ders`", ""},
		{my, `SELECT 'it\'s; x', "a;b"`, ""},
		{my, "SELECT 1 # a comment; here", ""},
		{my, "SELECT 1 -- a comment; here", ""},
		{my, "SELECT 5--3", ""},
		{my, "SELECT 1 /* not nested /* ; */", ""},

		{pg, "", "is empty"},
		{pg, "  -- only a comment", "is empty"},
		{pg, ";", "empty before"},
		{pg, `\! id`, "backslash"},
		{my, `\! id`, "backslash"},
		{pg, `SELECT 1 \g`, "backslash"},
		{my, "SELECT 1\n\\! cat /proc/1/environ", "backslash"},
		{pg, "SET transaction_read_only = off; DELETE FROM orders", "several statements"},
		{my, "SELECT 1; DELETE FROM orders", "several statements"},
		{pg, "SELECT 1;;", "several statements"},
		{pg, "SELECT 1 -- x\n; DELETE FROM t", "several statements"},
		{pg, "SELECT $q$ a $q$; DELETE FROM t", "several statements"},
		{pg, `SELECT E'\'; DELETE FROM t; --'`, ""}, // one string
		{pg, `SELECT '\'; DELETE FROM t; --'`, "several statements"},
		{my, `SELECT '\'; DELETE FROM t; --'`, ""}, // one string in MySQL
		{pg, "SELECT 1 -- x\n DELETE", ""},         // one (invalid) statement: the server says
		{pg, "SELECT 'open", "not closed"},
		{pg, "SELECT 1 /* open", "not closed"},
		{pg, "SELECT 1 /* a /* b */", "not closed"},
		{pg, "SELECT $x$ open", "not closed"},
		{my, "SELECT `open", "not closed"},
		{my, "SELECT 1 /*! , 2 */", "executable"},
		{my, "/*M!100000 DELETE FROM t */ SELECT 1", "executable"},
		{pg, "DELETE FROM orders", "starts with DELETE"},
		{my, "DO SLEEP(1)", "starts with DO"},
		{my, "SHOW TABLES", "starts with SHOW"},
		{pg, "COPY (SELECT 1) TO PROGRAM 'id'", "starts with COPY"},
		{pg, "COMMIT", "starts with COMMIT"},
		{pg, "* FROM t", "starts with"},
		{pg, "SELECT 1\x00", "NUL"},
	} {
		errs := CheckSQL(tt.engine, tt.sql, p)
		switch {
		case tt.want == "" && len(errs) > 0:
			t.Errorf("%s %q refused: %v", tt.engine, tt.sql, errs)
		case tt.want != "" && len(errs) == 0:
			t.Errorf("%s %q accepted, want %q", tt.engine, tt.sql, tt.want)
		case tt.want != "" && !strings.Contains(errs.ToAggregate().Error(), tt.want):
			t.Errorf("%s %q: %v, want %q", tt.engine, tt.sql, errs, tt.want)
		case tt.want != "" && !strings.HasPrefix(errs[0].Error(), "spec.checks[2].sql: "):
			t.Errorf("%s %q: %v does not name the field", tt.engine, tt.sql, errs)
		}
	}
}

// FuzzCheckSQL: whatever is accepted is closed (every string, name and
// comment ends) and one statement: another statement after it on a new
// line is always seen, and a backslash command at the start of a line
// after it too.
func FuzzCheckSQL(f *testing.F) {
	for _, s := range []string{"SELECT 1", "SELECT 'a;b' -- c", "SELECT $$x$$;", "SELECT `a`#", `SELECT E'\''`, "/* a */ (VALUES (1))"} {
		f.Add(true, s)
		f.Add(false, s)
	}
	f.Fuzz(func(t *testing.T, mysql bool, sql string) {
		engine := cairnv1.PostgresEngine
		if mysql {
			engine = cairnv1.MySQLEngine
		}
		p := field.NewPath("spec", "checks").Index(0).Child("sql")
		if len(CheckSQL(engine, sql, p)) > 0 {
			return
		}
		if strings.ContainsRune(sql, 0) {
			t.Fatalf("accepted %q with a NUL", sql)
		}
		for _, tail := range []string{"\n; DELETE FROM t", "\n\\! id"} {
			if len(CheckSQL(engine, sql+tail, p)) == 0 {
				t.Fatalf("%s: accepted %q", engine, sql+tail)
			}
		}
	})
}
