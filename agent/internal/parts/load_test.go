package parts

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
)

// loadFormat is the statement's format between its character set and its
// column list.
const loadFormat = ` FIELDS TERMINATED BY '\t' ENCLOSED BY '' ESCAPED BY '\\' LINES STARTING BY '' TERMINATED BY '\n'`

func TestPlanLoad(t *testing.T) {
	for _, tc := range []struct {
		cols []engine.Column
		want string // "" planned, else in the reason
		stmt string
	}{
		// utf8mb4 text and binary: read as CHARACTER SET binary, the
		// binary values as their bytes.
		{cols: []engine.Column{{Name: "id", Type: "int"}, {Name: "b`x", Type: "blob"}, {Name: "s", Type: "varchar", Charset: "utf8mb4"}},
			stmt: "CHARACTER SET binary" + loadFormat + " (`id`,`b``x`,`s`)"},
		// A latin1 column needs the server's conversion from utf8mb4:
		// binary values through UNHEX.
		{cols: []engine.Column{{Name: "id", Type: "int"}, {Name: "b`x", Type: "blob"}, {Name: "s", Type: "varchar", Charset: "latin1"}},
			stmt: "CHARACTER SET utf8mb4" + loadFormat + " (`id`,@c1,`s`) SET `b``x`=UNHEX(@c1)"},
		{cols: []engine.Column{{Name: "b", Type: "varbinary"}, {Name: "e", Type: "enum", Charset: "utf8mb4"}}, stmt: "CHARACTER SET utf8mb4" + loadFormat + " (@c0,`e`) SET `b`=UNHEX(@c0)"},
		{cols: []engine.Column{{Name: "b", Type: "varbinary"}, {Name: "j", Type: "json"}}, stmt: "CHARACTER SET utf8mb4" + loadFormat + " (@c0,`j`) SET `b`=UNHEX(@c0)"},
		{cols: []engine.Column{{Name: "id", Type: "int"}, {Name: "f", Type: "bit"}}, want: "type bit"},
		{cols: []engine.Column{{Name: "id", Type: "int"}, {Name: "g", Type: "int", Extra: "VIRTUAL GENERATED"}}, want: "VIRTUAL"},
		{cols: []engine.Column{{Name: "id", Type: "int"}, {Name: "g", Type: "int", Extra: "INVISIBLE"}}, want: "INVISIBLE"},
		{cols: []engine.Column{{Name: "p", Type: "point"}}, want: "type point"},
		{cols: []engine.Column{{Name: "t", Type: "timestamp", Extra: "DEFAULT_GENERATED on update CURRENT_TIMESTAMP"}}, stmt: " (`t`)"},
		{cols: nil, want: "not in information_schema"},
	} {
		p, why := planLoad("`t`", tc.cols)
		switch {
		case tc.want == "" && p == nil:
			t.Errorf("%v: not planned: %s", tc.cols, why)
		case tc.want == "" && !strings.HasSuffix(p.stmt, tc.stmt):
			t.Errorf("%v: statement %q, want it to end in %q", tc.cols, p.stmt, tc.stmt)
		case tc.want != "" && (p != nil || !strings.Contains(why, tc.want)):
			t.Errorf("%v: planned %v, reason %q, want %q", tc.cols, p != nil, why, tc.want)
		}
	}
}

// The server of the tests below, started once.
var (
	serverOnce sync.Once
	server     *testenv.MariaDB
	serverErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

func mariadb(t *testing.T) *testenv.MariaDB {
	t.Helper()
	serverOnce.Do(func() { server, serverErr = testenv.StartMariaDB("cairn", "load-test-pw") })
	if serverErr != nil {
		t.Fatalf("MariaDB: %v", serverErr)
	}
	return server
}

func sqlOK(t *testing.T, m *testenv.MariaDB, db, q string) string {
	t.Helper()
	out, err := m.SQL(db, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mysqlEngine(m *testenv.MariaDB, db string) *engine.MySQL {
	return &engine.MySQL{Conn: engine.Conn{Host: "127.0.0.1", Port: m.Port, User: m.User, Password: m.Password, Database: db}, ForParts: true}
}

// collector keeps what the Splitter sorts: the header, the schema, and
// each table's data statements.
type collector struct {
	preamble, schema []byte
	data             map[string][]byte
}

func (c *collector) Preamble(p []byte) error { c.preamble = append([]byte(nil), p...); return nil }
func (c *collector) Write(phase, table string, p []byte) error {
	switch phase {
	case PhaseSchema, PhaseIndex:
		c.schema = append(c.schema, p...)
	case PhaseData:
		c.data[table] = append(c.data[table], p...)
	}
	return nil
}
func (c *collector) StatementEnd(string) error { return nil }

// dumpParts dumps db as a multi-part backup does and returns the schema
// (with the deferred keys) and each table's data part (header and
// INSERTs).
func dumpParts(t *testing.T, m *testenv.MariaDB, db string) ([]byte, map[string][]byte) {
	t.Helper()
	c := &collector{data: map[string][]byte{}}
	sp := NewSplitter(c)
	if err := mysqlEngine(m, db).Dump(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	parts := map[string][]byte{}
	for tb, d := range c.data {
		parts[tb] = append(append([]byte(nil), c.preamble...), d...)
	}
	return append(append([]byte(nil), c.preamble...), c.schema...), parts
}

func status(t *testing.T, m *testenv.MariaDB, name string) int {
	t.Helper()
	out := sqlOK(t, m, "", "SHOW GLOBAL STATUS LIKE '"+name+"'")
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(out, name)))
	if err != nil {
		t.Fatalf("%s: %q", name, out)
	}
	return n
}

// content is every row of table, every column in hex with its NULLs.
func content(t *testing.T, m *testenv.MariaDB, db, table string, cols ...string) string {
	t.Helper()
	var exprs []string
	for _, c := range cols {
		exprs = append(exprs, "IFNULL(HEX(`"+c+"`),'<NULL>')")
	}
	return sqlOK(t, m, db, "SELECT "+strings.Join(exprs, ",")+" FROM `"+table+"` ORDER BY 1")
}

func sqlHex(b []byte) string {
	if len(b) == 0 {
		return "''"
	}
	return "0x" + hex.EncodeToString(b)
}

// randChars are the bytes of the random strings: escapes and separators
// above all.
const randChars = "ab\t\n\r\\'\"\x00\x1a%_N"

// hostile are the values a text column must come back with, byte for byte.
var hostile = []string{"", "a\tb", "line\nbreak", "cr\r\nlf", `back\slash`, `\N`, "NULL", `\\N`, "it's", `"dq"`, "nul\x00byte",
	"ctrl-z\x1a", `%_\%\_`, "emoji 😀 ü", "tab at end\t", `\`, "\n", "\t", "'", "''", `\'`, " lead and trail ", "\x08bs"}

func TestLoadHostileValues(t *testing.T) {
	m := mariadb(t)
	ctx := context.Background()
	sqlOK(t, m, "", "CREATE DATABASE hsrc; CREATE DATABASE hdst;")
	sqlOK(t, m, "hsrc", "CREATE TABLE h (id int PRIMARY KEY, s varchar(200), tx text, c char(20) CHARACTER SET latin1, b varbinary(300), bl blob, "+
		"d decimal(30,10), f double, fl float, dt datetime(6), ts timestamp NULL DEFAULT NULL, tm time, y year, e enum('a','b\tc'), st set('x','y'), j json, "+
		"u bigint unsigned, KEY s_key (s))")
	var rows []string
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for i, s := range hostile {
		rows = append(rows, fmt.Sprintf("(%d, CONVERT(%s USING utf8mb4), CONVERT(%s USING utf8mb4), 'lat\\tiné', %s, %s, %s, %s, %s, '2024-02-29 23:59:59.123456', '2038-01-19 03:14:07', '-838:59:59', 2155, 'b\\tc', 'x,y', '{\"k\": \"v\\\\t\"}', 18446744073709551615)",
			i+1, sqlHex([]byte(s)), sqlHex([]byte(s)), sqlHex(all[i:]), sqlHex([]byte(s)),
			[]string{"-99999999999999999999.9999999999", "0.0000000001", "0"}[i%3], []string{"1.7976931348623157e308", "-2.2250738585072014e-308", "0.1"}[i%3], []string{"3.40282e38", "-1.17549e-38", "0.1"}[i%3]))
	}
	rows = append(rows, "(1000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
		"(1001, '', '', '', '', '', 0, 0, 0, '0000-00-00 00:00:00', NULL, '00:00:00', 0, 'a', '', '[]', 0)")
	sqlOK(t, m, "hsrc", "SET sql_mode=''; INSERT INTO h VALUES "+strings.Join(rows, ",\n"))
	// Many rows of random bytes: values and escapes across every read
	// buffer's end.
	sqlOK(t, m, "hsrc", "CREATE TABLE r (id int PRIMARY KEY, s varchar(3000), b varbinary(3000))")
	rnd := rand.New(rand.NewPCG(1, 2))
	for batch := 0; batch < 4; batch++ {
		var vals []string
		for i := 0; i < 500; i++ {
			s := make([]byte, rnd.IntN(2000))
			for j := range s {
				s[j] = randChars[rnd.IntN(len(randChars))]
			}
			b := make([]byte, rnd.IntN(2000))
			for j := range b {
				b[j] = byte(rnd.IntN(256))
			}
			vals = append(vals, fmt.Sprintf("(%d, CONVERT(%s USING utf8mb4), %s)", batch*500+i, sqlHex(s), sqlHex(b)))
		}
		sqlOK(t, m, "hsrc", "INSERT INTO r VALUES "+strings.Join(vals, ","))
	}
	// Only utf8mb4 and utf8mb3 text: its rows load as CHARACTER SET
	// binary, binary values as their bytes.
	sqlOK(t, m, "hsrc", "CREATE TABLE u (id int PRIMARY KEY, s varchar(200) CHARACTER SET utf8mb4, s3 text CHARACTER SET utf8mb3, b varbinary(300), bl longblob, d datetime(6))")
	var urows []string
	for i, s := range hostile {
		s3 := strings.ReplaceAll(s, "😀", "€") // utf8mb3: three bytes at most
		urows = append(urows, fmt.Sprintf("(%d, CONVERT(%s USING utf8mb4), CONVERT(%s USING utf8mb3), %s, %s, '2024-02-29 23:59:59.123456')",
			i+1, sqlHex([]byte(s)), sqlHex([]byte(s3)), sqlHex(all[i:]), sqlHex([]byte(s))))
	}
	urows = append(urows, "(1000, NULL, NULL, NULL, NULL, NULL)", "(1001, '', '', '', '', '0000-00-00 00:00:00')")
	sqlOK(t, m, "hsrc", "SET sql_mode=''; INSERT INTO u VALUES "+strings.Join(urows, ",\n"))
	schema, data := dumpParts(t, m, "hsrc")
	sqlOK(t, m, "hdst", string(schema))

	dst := mysqlEngine(m, "hdst")
	l, err := planLoads(ctx, dst, []Part{{Table: "`h`"}, {Table: "`r`"}, {Table: "`u`"}}, slog.New(slog.DiscardHandler))
	if err != nil || l == nil || l.plans["`h`"] == nil || l.plans["`r`"] == nil || l.plans["`u`"] == nil {
		t.Fatalf("plans %+v, %v", l, err)
	}
	// h has a latin1 column, an enum, a set: utf8mb4 and UNHEX.
	if l.plans["`h`"].raw || !l.plans["`r`"].raw || !l.plans["`u`"].raw {
		t.Fatalf("raw plans: h %v r %v u %v, want false true true", l.plans["`h`"].raw, l.plans["`r`"].raw, l.plans["`u`"].raw)
	}
	// h has a secondary key while it loads (the schema above adds the
	// deferred ones): InnoDB's bulk mode; r and u load row by row.
	if l.plans["`h`"].rowByRow || !l.plans["`r`"].rowByRow || !l.plans["`u`"].rowByRow {
		t.Fatalf("row by row: h %v r %v u %v, want false true true", l.plans["`h`"].rowByRow, l.plans["`r`"].rowByRow, l.plans["`u`"].rowByRow)
	}
	before := status(t, m, "Com_load")
	for _, tb := range []string{"`h`", "`r`", "`u`"} {
		if err := (loadPart{Engine: dst, l: l, table: tb}).Restore(ctx, bytes.NewReader(data[tb])); err != nil {
			t.Fatalf("load %s: %v", tb, err)
		}
	}
	if n := status(t, m, "Com_load") - before; n != 3 {
		t.Errorf("%d LOAD DATA statements ran, want 3 (one per part)", n)
	}
	ucols := []string{"id", "s", "s3", "b", "bl", "d"}
	if got, want := content(t, m, "hdst", "u", ucols...), content(t, m, "hsrc", "u", ucols...); got != want {
		t.Errorf("table u differs after the load:\n got %s\nwant %s", got, want)
	}
	cols := []string{"id", "s", "tx", "c", "b", "bl", "d", "f", "fl", "dt", "ts", "tm", "y", "e", "st", "j", "u"}
	if got, want := content(t, m, "hdst", "h", cols...), content(t, m, "hsrc", "h", cols...); got != want {
		t.Errorf("table h differs after the load:\n got %s\nwant %s", got, want)
	}
	if got, want := content(t, m, "hdst", "r", "id", "s", "b"), content(t, m, "hsrc", "r", "id", "s", "b"); got != want {
		t.Errorf("table r differs after the load (%d vs %d bytes of hex)", len(got), len(want))
	}
}

func TestLoadRefusedRollsBack(t *testing.T) {
	m := mariadb(t)
	ctx := context.Background()
	sqlOK(t, m, "", "CREATE DATABASE rsrc; CREATE DATABASE rdst;")
	sqlOK(t, m, "rsrc", "CREATE TABLE k (id int PRIMARY KEY, v varchar(10)); INSERT INTO k SELECT seq, CONCAT('v', seq) FROM seq_1_to_20000;")
	schema, data := dumpParts(t, m, "rsrc")
	part := data["`k`"]
	count := func() string { return sqlOK(t, m, "rdst", "SELECT COUNT(*) FROM k") }
	dst := mysqlEngine(m, "rdst")
	load := func(r io.Reader) error {
		t.Helper()
		l, err := planLoads(ctx, dst, []Part{{Table: "`k`"}}, slog.New(slog.DiscardHandler))
		if err != nil || l.plans["`k`"] == nil {
			t.Fatalf("plan: %v", err)
		}
		return loadPart{Engine: dst, l: l, table: "`k`"}.Restore(ctx, r)
	}
	sqlOK(t, m, "rdst", string(schema))

	t.Run("duplicate key", func(t *testing.T) {
		// LOAD DATA LOCAL skips a duplicate with a warning: the check
		// before the COMMIT refuses it, nothing of the part stays.
		sqlOK(t, m, "rdst", "DELETE FROM k; INSERT INTO k VALUES (777, 'mine')")
		err := load(bytes.NewReader(part))
		if !errors.Is(err, errNotLoadable) || !strings.Contains(err.Error(), "stored 19999 of the 20000 rows sent, with 1 warning") {
			t.Fatalf("load over a duplicate: %v, want it refused before the COMMIT", err)
		}
		if got := count(); got != "1" {
			t.Errorf("%s rows after the refused load, want only the 1 that was there", got)
		}
		// Its INSERTs (the fallback) fail on the duplicate as they always did.
		if err := (txEngine{dst}).Restore(ctx, bytes.NewReader(part)); err == nil || !strings.Contains(err.Error(), "Duplicate entry") {
			t.Errorf("INSERTs over a duplicate: %v", err)
		}
	})
	t.Run("value cut", func(t *testing.T) {
		// Every row stored, but cut to fit (a warning each): refused too.
		sqlOK(t, m, "rdst", "DELETE FROM k; ALTER TABLE k MODIFY v varchar(3)")
		defer sqlOK(t, m, "rdst", "ALTER TABLE k MODIFY v varchar(10)")
		err := load(bytes.NewReader(part))
		if !errors.Is(err, errNotLoadable) || !strings.Contains(err.Error(), "stored 20000 of the 20000 rows sent, with ") {
			t.Fatalf("load of values cut to fit: %v, want it refused before the COMMIT", err)
		}
		if got := count(); got != "0" {
			t.Errorf("%s rows after the refused load", got)
		}
	})
	t.Run("broken stream", func(t *testing.T) {
		sqlOK(t, m, "rdst", "DELETE FROM k")
		broken := errors.New("checksum mismatch")
		err := load(io.MultiReader(bytes.NewReader(part[:len(part)*2/3]), &failing{err: broken}))
		if !errors.Is(err, broken) || errors.Is(err, errNotLoadable) {
			t.Fatalf("load of a broken stream: %v", err)
		}
		if got := count(); got != "0" {
			t.Errorf("%s rows committed from a broken stream", got)
		}
	})
	t.Run("a value not taken", func(t *testing.T) {
		sqlOK(t, m, "rdst", "DELETE FROM k")
		i := bytes.LastIndex(part, []byte("),"))
		bad := append(append([]byte(nil), part[:i+2]...), "(99999,b'1');\n"...)
		err := load(bytes.NewReader(bad))
		if !errors.Is(err, errNotLoadable) {
			t.Fatalf("load with b'1': %v, want not loadable", err)
		}
		if got := count(); got != "0" {
			t.Errorf("%s rows committed from a refused load", got)
		}
	})
	t.Run("whole", func(t *testing.T) {
		sqlOK(t, m, "rdst", "DELETE FROM k")
		if err := load(bytes.NewReader(part)); err != nil {
			t.Fatal(err)
		}
		if got := count(); got != "20000" {
			t.Errorf("%s rows, want 20000", got)
		}
	})
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func TestLoadFallsBackToInsert(t *testing.T) {
	m := mariadb(t)
	ctx := context.Background()
	sqlOK(t, m, "", "CREATE DATABASE fsrc; CREATE DATABASE fdst;")
	sqlOK(t, m, "fsrc", "CREATE TABLE bits (id int PRIMARY KEY, f bit(3)); INSERT INTO bits VALUES (1, b'101'), (2, NULL);"+
		"CREATE TABLE gen (id int PRIMARY KEY, v int, g int AS (v * 2) VIRTUAL); INSERT INTO gen (id, v) VALUES (1, 21);")
	schema, data := dumpParts(t, m, "fsrc")
	sqlOK(t, m, "fdst", string(schema))
	dst := mysqlEngine(m, "fdst")
	var logs bytes.Buffer
	l, err := planLoads(ctx, dst, []Part{{Table: "`bits`"}, {Table: "`gen`"}}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || len(l.plans) != 0 {
		t.Fatalf("plans %v, %v: want none", l.plans, err)
	}
	for _, want := range []string{"table=`bits` reason=\"column f is of type bit\"", "table=`gen` reason=\"column g is VIRTUAL GENERATED\""} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	before := status(t, m, "Com_load")
	for _, tb := range []string{"`bits`", "`gen`"} {
		if err := (loadPart{Engine: dst, l: l, table: tb}).Restore(ctx, bytes.NewReader(data[tb])); err != nil {
			t.Fatalf("%s: %v", tb, err)
		}
	}
	if n := status(t, m, "Com_load") - before; n != 0 {
		t.Errorf("%d LOAD DATA ran, want none", n)
	}
	if got := sqlOK(t, m, "fdst", "SELECT id, BIN(f) FROM bits ORDER BY id; SELECT id, v, g FROM gen"); got != "1\t101\n2\tNULL\n1\t21\t42" {
		t.Errorf("restored %q", got)
	}
}
