package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseConninfoValue reads one value the way libpq's conninfo_parse does:
// a quoted value runs to the first unescaped quote, a backslash escapes the
// next character. It returns the value and what follows it.
func parseConninfoValue(s string) (val, rest string, ok bool) {
	if !strings.HasPrefix(s, "'") {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i == len(s) {
				return "", "", false
			}
			b.WriteByte(s[i])
		case '\'':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

func TestQuoteConninfo(t *testing.T) {
	for _, v := range []string{"", "shop", "dbname=x host=y", "x' host='y", `back\slash`, `\'`, "postgresql://h/db", "-h evil", "é ü"} {
		q := QuoteConninfo(v)
		got, rest, ok := parseConninfoValue(q)
		if !ok || got != v || rest != "" {
			t.Errorf("QuoteConninfo(%q) = %s, reads back as %q (rest %q, ok %v)", v, q, got, rest, ok)
		}
	}
}

func FuzzQuoteConninfo(f *testing.F) {
	for _, s := range []string{"shop", "dbname=x host=y", "x' host='y", `a\`, `\\'`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, rest, ok := parseConninfoValue(QuoteConninfo(v))
		if !ok || got != v || rest != "" {
			t.Fatalf("%q reads back as %q, rest %q, ok %v", v, got, rest, ok)
		}
	})
}

// The database name never is an argument of its own that a tool could read
// as an option, and reaches PostgreSQL only inside the quoted conninfo.
func TestArgsCarryValuesAsData(t *testing.T) {
	c := Conn{Host: "db.shop.svc", Port: 5432, Database: "-h evil", User: "--help", Password: "pw"}
	p := &Postgres{Conn: c}
	args := p.connArgs(c.Database)
	if len(args) != 2 || args[0] != "--no-password" ||
		args[1] != `--dbname=host='db.shop.svc' port='5432' user='--help' dbname='-h evil'` {
		t.Errorf("postgres args = %q", args)
	}
	m := &MySQL{Conn: c}
	for _, a := range m.connArgs() {
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") && a != "--no-defaults" {
			t.Errorf("mysql argument %q is not --option[=value]", a)
		}
	}
}

func TestCheckConn(t *testing.T) {
	ok := Conn{Host: "db.shop.svc", Database: "-h evil dbname=x", User: "u"}
	tests := []struct {
		name    string
		mod     func(c *Conn)
		wantErr string
	}{
		{"hostile names are data", func(c *Conn) {}, ""},
		{"ipv4", func(c *Conn) { c.Host = "10.0.0.1" }, ""},
		{"ipv6", func(c *Conn) { c.Host = "fd00::1" }, ""},
		{"underscore host", func(c *Conn) { c.Host = "my_db" }, ""},
		{"option host", func(c *Conn) { c.Host = "-h" }, "host"},
		{"socket dir", func(c *Conn) { c.Host = "/var/run/postgresql" }, "host"},
		{"host list", func(c *Conn) { c.Host = "a,b" }, "host"},
		{"host with space", func(c *Conn) { c.Host = "a port=1" }, "host"},
		{"newline in name", func(c *Conn) { c.Database = "x\n\\! id" }, "control character"},
		{"NUL in user", func(c *Conn) { c.User = "u\x00" }, "control character"},
		{"invalid UTF-8", func(c *Conn) { c.Database = "\xff" }, "UTF-8"},
	}
	for _, tt := range tests {
		c := ok
		tt.mod(&c)
		err := CheckConn(c)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: CheckConn(%+v) = %v, want %q", tt.name, c, err, tt.wantErr)
		}
	}
}

// failAfter yields n bytes, then fails.
type failAfter struct{ n int }

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("store connection reset")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

// A broken input kills the tool: it never sees a clean end of input, on
// which it would finish (commit) what it read.
func TestBrokenInputKillsTool(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "finished")
	script := `cat >/dev/null && touch "$MARK"`
	err := run(context.Background(), "", &failAfter{n: 1 << 20}, io.Discard, childEnv("MARK="+mark), "sh", "-c", script)
	var se *StreamError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "store connection reset") {
		t.Fatalf("err = %v, want a StreamError with the input's error", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the tool saw a clean end of input and finished")
	}
	// A complete input ends cleanly and the tool finishes.
	if err := run(context.Background(), "", strings.NewReader("data"), io.Discard, childEnv("MARK="+mark), "sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the tool did not finish on a complete input: %v", err)
	}
	// A tool that stops reading early is not a stream error.
	err = run(context.Background(), "", strings.NewReader(strings.Repeat("x", 4<<20)), io.Discard, childEnv(), "sh", "-c", "exit 3")
	if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("early exit: err = %v", err)
	}
}
