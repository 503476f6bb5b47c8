package inventory

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/patterns"
)

const password = "inv-PASSWORD-71c3e0d2"

var (
	pg           *testenv.Postgres
	maria        *testenv.MariaDB
	pgErr, myErr error
)

func TestMain(m *testing.M) {
	pg, pgErr = testenv.StartPostgres(password)
	maria, myErr = testenv.StartMariaDB("cairn", password)
	for _, err := range []error{pgErr, myErr} {
		if err != nil {
			fmt.Fprintf(os.Stderr, "set-up failed: %v\n", err)
		}
	}
	code := m.Run()
	pg.Stop()
	maria.Stop()
	os.Exit(code)
}

func needPG(t *testing.T) {
	t.Helper()
	if pgErr != nil {
		t.Fatalf("PostgreSQL test server: %v", pgErr)
	}
}

func needMy(t *testing.T) {
	t.Helper()
	if myErr != nil {
		t.Fatalf("MariaDB test server: %v", myErr)
	}
}

func pgConn(db string) engine.Conn {
	return engine.Conn{Host: "127.0.0.1", Port: pg.Port, Database: db, User: "postgres", Password: password}
}

func myConn(db string) engine.Conn {
	return engine.Conn{Host: "127.0.0.1", Port: maria.Port, Database: db, User: "cairn", Password: password}
}

func pgSQL(t *testing.T, db, sql string) string {
	t.Helper()
	out, err := pg.SQL(db, sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mySQL(t *testing.T, db, sql string) string {
	t.Helper()
	out, err := maria.SQL(db, sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func filter(t *testing.T, include, exclude string) *patterns.Filter {
	t.Helper()
	f, err := patterns.NewFilter(include, exclude)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func take(t *testing.T, engineName string, c engine.Conn, o Options) *Inventory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inv, err := Take(ctx, engineName, c, o)
	if err != nil {
		t.Fatalf("take %s: %v", c.Database, err)
	}
	return inv
}

func keys(inv *Inventory) string {
	var ks []string
	for _, t := range inv.Tables {
		ks = append(ks, t.Key())
	}
	return strings.Join(ks, ",")
}

const pgSchema = `
CREATE SCHEMA sales;
CREATE TABLE public.items (id int PRIMARY KEY, name text, price numeric(10,2), at timestamptz, data bytea, f float8, "t" text);
CREATE TABLE public.tmp_x (id int);
CREATE TABLE sales.orders (id int, item int, note text);
CREATE TABLE "Odd ""name"".x" (v text);
`

const pgData = `
INSERT INTO public.items SELECT i, 'item ' || i, i * 1.5, timestamptz '2024-01-01 00:00+02' + i * interval '1 hour',
  decode(md5(i::text), 'hex'), i / 3.0, CASE WHEN i % 2 = 0 THEN NULL ELSE '' END FROM generate_series(1, 500) i;
INSERT INTO sales.orders SELECT i, i % 50, repeat('n', i % 7) FROM generate_series(1, 300) i;
INSERT INTO "Odd ""name"".x" VALUES ('a'), ('b');
`

// pgData in another order, another session time zone and DateStyle.
const pgDataReversed = `
SET TimeZone = 'Asia/Tokyo'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 0;
INSERT INTO "Odd ""name"".x" VALUES ('b'), ('a');
INSERT INTO sales.orders SELECT i, i % 50, repeat('n', i % 7) FROM generate_series(300, 1, -1) i;
INSERT INTO public.items SELECT i, 'item ' || i, i * 1.5, timestamptz '2024-01-01 00:00+02' + i * interval '1 hour',
  decode(md5(i::text), 'hex'), i / 3.0, CASE WHEN i % 2 = 0 THEN NULL ELSE '' END FROM generate_series(500, 1, -1) i;
`

func TestPostgres(t *testing.T) {
	needPG(t)
	for _, db := range []string{"inv_a", "inv_b"} {
		pgSQL(t, "postgres", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
		pgSQL(t, db, pgSchema)
	}
	pgSQL(t, "inv_a", pgData)
	pgSQL(t, "inv_b", pgDataReversed)

	all := take(t, "postgres", pgConn("inv_a"), Options{Method: MethodChecksum, Parallel: 3})
	if got, want := keys(all), `"public"."Odd ""name"".x",public.items,public.tmp_x,sales.orders`; got != want {
		t.Errorf("tables %q, want %q", got, want)
	}
	if !all.Consistent || all.Method != MethodChecksum {
		t.Errorf("inventory %+v: want consistent Checksum", all)
	}
	items, _ := all.Find("public.items")
	if items.Rows != 500 || len(items.Checksum) != 16 || items.Bytes <= 0 {
		t.Errorf("public.items = %+v", items)
	}
	b := take(t, "postgres", pgConn("inv_b"), Options{Method: MethodChecksum})
	if v := Compare(all, b, MethodChecksum); v.Mismatched != 0 || v.Matched != 4 {
		t.Errorf("same rows in another order and session settings: %+v", v)
	}

	for _, tc := range []struct{ include, exclude, want string }{
		{"public", "", `"public"."Odd ""name"".x",public.items,public.tmp_x`},
		{"public", "public.tmp_*,public.O*", "public.items"},
		{"*.*s", "", "public.items,sales.orders"},
		{"", "public", "sales.orders"},
		{`public.Odd "name".x`, "", `"public"."Odd ""name"".x"`},
		{`*.*.x`, "", `"public"."Odd ""name"".x"`},
		{"nosuch", "", ""},
	} {
		inv := take(t, "postgres", pgConn("inv_a"), Options{Filter: filter(t, tc.include, tc.exclude), Method: MethodRowCount})
		if got := keys(inv); got != tc.want {
			t.Errorf("include %q exclude %q: %q, want %q", tc.include, tc.exclude, got, tc.want)
		}
	}

	// A changed value, a duplicated row and a deleted row each change the
	// checksum; a duplicated row does not cancel out.
	for _, change := range []string{
		"UPDATE public.items SET name = 'changed' WHERE id = 7",
		"INSERT INTO public.items (id, name) SELECT 1000, name FROM public.items WHERE id = 1; UPDATE public.items SET name = 'item 1' WHERE id = 1000",
		"UPDATE public.items SET t = NULL WHERE id = 1", // '' → NULL
		"DELETE FROM sales.orders WHERE id = 3",
	} {
		pgSQL(t, "inv_b", change)
		c := take(t, "postgres", pgConn("inv_b"), Options{Method: MethodChecksum, Parallel: 2})
		if v := Compare(all, c, MethodChecksum); v.Mismatched != 1 || v.Items[0].Match {
			t.Errorf("after %q: %+v", change, v)
		}
		pgSQL(t, "postgres", "DROP DATABASE inv_b WITH (FORCE); CREATE DATABASE inv_b")
		pgSQL(t, "inv_b", pgSchema+pgDataReversed)
	}
	// Duplicate rows: two equal rows differ from one row counted twice by XOR.
	pgSQL(t, "inv_b", "INSERT INTO \"Odd \"\"name\"\".x\" VALUES ('a'), ('a')")
	c := take(t, "postgres", pgConn("inv_b"), Options{Method: MethodChecksum})
	x, _ := c.Find(`"public"."Odd ""name"".x"`)
	x0, _ := all.Find(`"public"."Odd ""name"".x"`)
	if x.Checksum == x0.Checksum {
		t.Errorf("two more equal rows left the checksum unchanged: %s", x.Checksum)
	}
}

// TestPostgresLargeObjects: the large objects are one entry, there only
// when the database has any, whatever the filter; its checksum is the same
// for the same OIDs and contents created in another order, and changes
// with one byte, with an OID, and with an extra object.
func TestPostgresLargeObjects(t *testing.T) {
	needPG(t)
	for _, db := range []string{"inv_lo_a", "inv_lo_b"} {
		pgSQL(t, "postgres", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
		pgSQL(t, db, "CREATE TABLE t (id int)")
	}
	defer pgSQL(t, "postgres", "DROP DATABASE inv_lo_a; DROP DATABASE inv_lo_b")
	if inv := take(t, "postgres", pgConn("inv_lo_a"), Options{Method: MethodChecksum}); keys(inv) != "public.t" {
		t.Fatalf("without large objects: %s", keys(inv))
	}
	pgSQL(t, "inv_lo_a", `SELECT lo_from_bytea(70001, decode(repeat('ab', 1500000), 'hex')), lo_from_bytea(70002, 'x'), lo_create(70003)`)
	pgSQL(t, "inv_lo_b", `SELECT lo_create(70003), lo_from_bytea(70002, 'x'), lo_from_bytea(70001, decode(repeat('ab', 1500000), 'hex'))`)
	get := func(db string, o Options) Table {
		t.Helper()
		inv := take(t, "postgres", pgConn(db), o)
		lo, ok := inv.Find("pg_catalog.pg_largeobject")
		if !ok {
			t.Fatalf("%s: no large objects entry: %s", db, keys(inv))
		}
		return lo
	}
	a := get("inv_lo_a", Options{Method: MethodChecksum, Filter: filter(t, "sales", "")})
	b := get("inv_lo_b", Options{Method: MethodChecksum})
	if a.Rows != 3 || a.Bytes != 1500001 || len(a.Checksum) != 16 || a != b {
		t.Fatalf("large objects: %+v and %+v", a, b)
	}
	if rc := get("inv_lo_a", Options{Method: MethodRowCount}); rc.Rows != 3 || rc.Checksum != "" {
		t.Errorf("RowCount entry: %+v", rc)
	}
	for _, change := range []string{
		"SELECT lo_put(70001, 1499999, 'z')",
		"SELECT lo_unlink(70002), lo_from_bytea(70004, 'x')",
		"SELECT lo_create(70005)",
	} {
		pgSQL(t, "inv_lo_b", change)
		if c := get("inv_lo_b", Options{Method: MethodChecksum}); c.Checksum == a.Checksum {
			t.Errorf("after %s the checksum is unchanged", change)
		}
		pgSQL(t, "postgres", "DROP DATABASE inv_lo_b WITH (FORCE); CREATE DATABASE inv_lo_b")
		pgSQL(t, "inv_lo_b", `CREATE TABLE t (id int); SELECT lo_create(70003), lo_from_bytea(70002, 'x'), lo_from_bytea(70001, decode(repeat('ab', 1500000), 'hex'))`)
	}
}

func TestPostgresSnapshot(t *testing.T) {
	needPG(t)
	pgSQL(t, "postgres", "DROP DATABASE IF EXISTS inv_snap; CREATE DATABASE inv_snap")
	pgSQL(t, "inv_snap", "CREATE TABLE t (id int); INSERT INTO t SELECT generate_series(1, 10)")
	ctx := context.Background()
	holder, err := ConnectPostgres(ctx, pgConn("inv_snap"), "inv_snap")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, id, err := ExportSnapshot(ctx, holder)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	pgSQL(t, "inv_snap", "INSERT INTO t SELECT generate_series(11, 15); CREATE TABLE later (id int)")
	inv := take(t, "postgres", pgConn("inv_snap"), Options{Method: MethodRowCount, Snapshot: id, Parallel: 2})
	if got := keys(inv); got != "public.t" {
		t.Errorf("tables in the snapshot: %q", got)
	}
	if tt, _ := inv.Find("public.t"); tt.Rows != 10 {
		t.Errorf("rows in the snapshot: %d, want 10", tt.Rows)
	}
	now := take(t, "postgres", pgConn("inv_snap"), Options{Method: MethodRowCount})
	if tt, _ := now.Find("public.t"); tt.Rows != 15 {
		t.Errorf("rows now: %d, want 15", tt.Rows)
	}
}

func TestPostgresErrorsHaveNoPassword(t *testing.T) {
	needPG(t)
	c := pgConn("postgres")
	c.Password = "wrong-" + password
	_, err := Take(context.Background(), "postgres", c, Options{})
	if err == nil || strings.Contains(err.Error(), c.Password) || !strings.Contains(err.Error(), "password authentication failed") {
		t.Errorf("wrong password: %v", err)
	}
}

const myTables = `
CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(100), price DECIMAL(10,2), at TIMESTAMP NULL, d DATETIME(3),
  data BLOB, f DOUBLE, j JSON, e ENUM('a','b'), b BIT(8), t TEXT);
CREATE TABLE tmp_x (id INT);
CREATE TABLE orders (id INT, item INT, note TEXT) ENGINE=InnoDB;
`

func myData(order string) string {
	return fmt.Sprintf(`
SET time_zone = '+05:00';
INSERT INTO items SELECT seq, CONCAT('item ', seq), seq * 1.5, FROM_UNIXTIME(1700000000 + seq * 3600), '2024-02-29 12:00:00.123',
  UNHEX(MD5(seq)), seq / 3, JSON_OBJECT('k', seq), IF(seq %% 2 = 0, 'a', 'b'), seq %% 256, IF(seq %% 2 = 0, NULL, '')
  FROM seq_1_to_500 ORDER BY seq %[1]s;
INSERT INTO orders SELECT seq, seq %% 50, REPEAT('n', seq %% 7) FROM seq_1_to_300 ORDER BY seq %[1]s;
`, order)
}

func TestMySQL(t *testing.T) {
	needMy(t)
	for _, db := range []string{"inv_a", "inv_b"} {
		mySQL(t, "", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
		mySQL(t, db, myTables)
	}
	mySQL(t, "inv_a", myData("ASC"))
	mySQL(t, "inv_b", myData("DESC"))
	a := take(t, "mysql", myConn("inv_a"), Options{Method: MethodChecksum})
	if got := keys(a); got != "items,orders,tmp_x" {
		t.Errorf("tables %q", got)
	}
	if it, _ := a.Find("items"); it.Rows != 500 || len(it.Checksum) != 16 {
		t.Errorf("items = %+v", it)
	}
	b := take(t, "mysql", myConn("inv_b"), Options{Method: MethodChecksum})
	if v := Compare(a, b, MethodChecksum); v.Mismatched != 0 || v.Matched != 3 {
		t.Errorf("same rows in another order: %+v", v)
	}
	for _, tc := range []struct{ include, exclude, want string }{
		{"inv_a", "", "items,orders,tmp_x"},
		{"other", "", ""},
		{"inv_a.*", "inv_a.tmp_*", "items,orders"},
		{"*.o*", "", "orders"},
	} {
		inv := take(t, "mysql", myConn("inv_a"), Options{Filter: filter(t, tc.include, tc.exclude), Method: MethodRowCount})
		if got := keys(inv); got != tc.want {
			t.Errorf("include %q exclude %q: %q, want %q", tc.include, tc.exclude, got, tc.want)
		}
	}
	// The schema part matches the name a migration gives (the source's).
	inv := take(t, "mysql", myConn("inv_b"), Options{Filter: filter(t, "inv_a.items", ""), Method: MethodRowCount, SchemaName: "inv_a"})
	if got := keys(inv); got != "items" {
		t.Errorf("inv_b as inv_a: %q", got)
	}
	for _, change := range []string{
		"UPDATE items SET name = 'changed' WHERE id = 7",
		"UPDATE items SET t = NULL WHERE id = 1",
		"UPDATE items SET data = UNHEX('00') WHERE id = 3",
		"UPDATE items SET at = at + INTERVAL 1 SECOND WHERE id = 4",
		"INSERT INTO tmp_x VALUES (1), (1)",
	} {
		mySQL(t, "inv_b", change)
		c := take(t, "mysql", myConn("inv_b"), Options{Method: MethodChecksum})
		if v := Compare(a, c, MethodChecksum); v.Mismatched != 1 {
			t.Errorf("after %q: %+v", change, v)
		}
		mySQL(t, "", "DROP DATABASE inv_b; CREATE DATABASE inv_b")
		mySQL(t, "inv_b", myTables+myData("DESC"))
	}
}

// Floating-point values that differ only beyond what their text shows by
// default (a MySQL FLOAT prints 6 significant digits, a FLOAT(M,D) D
// decimals) are told apart: the checksum hashes them at full precision.
func TestFloatsComparedAtFullPrecision(t *testing.T) {
	t.Run("mysql", func(t *testing.T) {
		needMy(t)
		const table = "CREATE TABLE f (id INT PRIMARY KEY, r FLOAT, d DOUBLE, g FLOAT(7,2))"
		const base = "INSERT INTO f VALUES (1, 1.0000001, 0.1e0 + 0.2e0, 12.344)"
		for _, change := range []string{
			"UPDATE f SET r = 1.0000002",    // same 6 digits: "1"
			"UPDATE f SET d = 0.3e0",        // 0.30000000000000004 vs 0.3
			"UPDATE f SET r = 16777217.0e0", // a FLOAT's neighbours: 16777216 and 16777218 print the same
		} {
			for _, db := range []string{"flt_a", "flt_b"} {
				mySQL(t, "", "DROP DATABASE IF EXISTS "+db+"; CREATE DATABASE "+db)
				mySQL(t, db, table+"; "+base)
			}
			if strings.Contains(change, "16777217") {
				mySQL(t, "flt_a", "UPDATE f SET r = 16777218.0e0")
			}
			mySQL(t, "flt_b", change)
			a := take(t, "mysql", myConn("flt_a"), Options{Method: MethodChecksum})
			b := take(t, "mysql", myConn("flt_b"), Options{Method: MethodChecksum})
			if v := Compare(a, b, MethodChecksum); v.Mismatched != 1 {
				t.Errorf("after %q: %+v", change, v)
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		needPG(t)
		for _, change := range []string{
			"UPDATE f SET r = 1.0000002",
			"UPDATE f SET d = 0.3",
		} {
			for _, db := range []string{"flt_a", "flt_b"} {
				pgSQL(t, "postgres", "DROP DATABASE IF EXISTS "+db)
				pgSQL(t, "postgres", "CREATE DATABASE "+db)
				pgSQL(t, db, "CREATE TABLE f (id int PRIMARY KEY, r real, d double precision); INSERT INTO f VALUES (1, 1.0000001, 0.1::float8 + 0.2::float8)")
			}
			pgSQL(t, "flt_b", change)
			a := take(t, "postgres", pgConn("flt_a"), Options{Method: MethodChecksum})
			b := take(t, "postgres", pgConn("flt_b"), Options{Method: MethodChecksum})
			if v := Compare(a, b, MethodChecksum); v.Mismatched != 1 {
				t.Errorf("after %q: %+v", change, v)
			}
		}
	})
}

func TestMySQLSnapshot(t *testing.T) {
	needMy(t)
	mySQL(t, "", "DROP DATABASE IF EXISTS inv_snap; CREATE DATABASE inv_snap")
	mySQL(t, "inv_snap", "CREATE TABLE t (id INT); INSERT INTO t SELECT seq FROM seq_1_to_10")
	ctx := context.Background()
	m, err := OpenMySQL(ctx, myConn("inv_snap"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := BeginConsistent(ctx, m.C); err != nil {
		t.Fatal(err)
	}
	mySQL(t, "inv_snap", "INSERT INTO t SELECT seq FROM seq_11_to_15")
	inv, err := m.TakeInTransaction(ctx, Options{Method: MethodRowCount})
	if err != nil {
		t.Fatal(err)
	}
	if tt, _ := inv.Find("t"); tt.Rows != 10 {
		t.Errorf("rows in the snapshot: %d, want 10", tt.Rows)
	}
}

func TestCompare(t *testing.T) {
	src := &Inventory{Method: MethodChecksum, Tables: []Table{
		{Schema: "s", Name: "a", Rows: 1, Checksum: "1"},
		{Schema: "s", Name: "b", Rows: 2, Checksum: "2"},
		{Schema: "s", Name: "c", Rows: 3, Checksum: "3"},
		{Schema: "s", Name: "d", Rows: 4, Checksum: "4"},
	}}
	dst := &Inventory{Method: MethodChecksum, Tables: []Table{
		{Schema: "s", Name: "a", Rows: 1, Checksum: "1"},
		{Schema: "s", Name: "b", Rows: 3, Checksum: "2"},
		{Schema: "s", Name: "c", Rows: 3, Checksum: "x"},
		{Schema: "s", Name: "e", Rows: 5},
	}}
	v := Compare(src, dst, MethodChecksum)
	var got []string
	for _, c := range v.Items {
		got = append(got, c.Table+":"+strconv.FormatBool(c.Match)+":"+c.Reason+":"+strconv.FormatInt(c.SourceRows, 10)+"/"+strconv.FormatInt(c.TargetRows, 10))
	}
	want := "s.b:false:rows differ:2/3 s.c:false:content differs:3/3 s.d:false:missing on target:4/-1 s.e:false:only on target:-1/5 s.a:true::1/1"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("items\n got %s\nwant %s", g, want)
	}
	if v.Tables != 5 || v.Matched != 1 || v.Mismatched != 4 {
		t.Errorf("counts %+v", v)
	}
	if rc := Compare(src, dst, MethodRowCount); rc.Mismatched != 3 {
		t.Errorf("RowCount ignores checksums: %+v", rc)
	}
}

func TestFoldSum(t *testing.T) {
	for in, want := range map[string]string{
		"0":                    "0000000000000000",
		"-1":                   "ffffffffffffffff",
		"18446744073709551616": "0000000000000000",
		"18446744073709551617": "0000000000000001",
	} {
		if got, err := foldSum(in); err != nil || got != want {
			t.Errorf("foldSum(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// No two tables share a key: names with a dot or a quote are quoted.
func TestKeysAreDistinct(t *testing.T) {
	for _, tc := range []struct {
		t    Table
		want string
	}{
		{Table{Schema: "public", Name: "orders"}, "public.orders"},
		{Table{Name: "orders"}, "orders"},
		{Table{Schema: "x", Name: "y.z"}, `"x"."y.z"`},
		{Table{Schema: "x.y", Name: "z"}, `"x.y"."z"`},
		{Table{Schema: "a", Name: `b"c`}, `"a"."b""c"`},
	} {
		if got := tc.t.Key(); got != tc.want {
			t.Errorf("%+v: key %s, want %s", tc.t, got, tc.want)
		}
	}
}
