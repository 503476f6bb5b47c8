package engine

import (
	"context"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, secret, want string }{
		{"auth failed for pw hunter2!", "hunter2", "auth failed for pw [REDACTED]!"},
		{"x hunter2 y hunter2", "hunter2", "x [REDACTED] y [REDACTED]"},
		{"nothing here", "hunter2", "nothing here"},
		{"a short secret is not searched: abc", "abc", "a short secret is not searched: abc"},
		{"empty secret", "", "empty secret"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in, tt.secret); got != tt.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tt.in, tt.secret, got, tt.want)
		}
	}
}

func TestTailBufferAndLastLines(t *testing.T) {
	tb := &tailBuffer{max: 10}
	tb.Write([]byte("0123456789abcdef"))
	tb.Write([]byte("XYZ"))
	if got := tb.String(); got != "789abcdefXYZ"[2:] {
		t.Errorf("tail = %q", got)
	}
	if got := lastLines("a\n\n b \nc\nd\n", 3); got != "b; c; d" {
		t.Errorf("lastLines = %q", got)
	}
}

func TestNewValidates(t *testing.T) {
	ok := Conn{Host: "h", Database: "d", User: "u"}
	tests := []struct {
		engine  string
		conn    Conn
		wantErr string
		port    int
	}{
		{"postgres", ok, "", 5432},
		{"mysql", ok, "", 3306},
		{"oracle", ok, "unknown engine", 0},
		{"postgres", Conn{Database: "d", User: "u"}, "CAIRN_DB_HOST", 0},
		{"postgres", Conn{Host: "h", User: "u"}, "CAIRN_DB_NAME", 0},
		{"mysql", Conn{Host: "h", Database: "d"}, "CAIRN_DB_USER", 0},
	}
	for _, tt := range tests {
		e, err := New(tt.engine, tt.conn)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%s, %+v) = %v, want %q", tt.engine, tt.conn, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var port int
		switch e := e.(type) {
		case *Postgres:
			port = e.Port
		case *MySQL:
			port = e.Port
		}
		if port != tt.port || e.Name() != tt.engine {
			t.Errorf("New(%s) = %s on port %d, want port %d", tt.engine, e.Name(), port, tt.port)
		}
	}
}

// The tool's environment carries the password but nothing of the agent's
// own environment (which holds the store's credentials).
func TestChildEnv(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "store-secret")
	t.Setenv("CAIRN_DB_PASSWORD", "db-secret")
	p := &Postgres{Conn: Conn{Password: "db-secret"}}
	env := strings.Join(p.env(), "\n")
	if strings.Contains(env, "store-secret") || strings.Contains(env, "CAIRN_DB_PASSWORD") {
		t.Errorf("child environment leaks the agent's: %s", env)
	}
	if !strings.Contains(env, "PGPASSWORD=db-secret") || !strings.Contains(env, "PATH=") {
		t.Errorf("child environment lacks PGPASSWORD or PATH: %s", env)
	}
}

func TestRunReportsMissingTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := run(context.Background(), "", nil, nil, nil, "pg_dump")
	if err == nil || !strings.Contains(err.Error(), "pg_dump not found") {
		t.Fatalf("err = %v", err)
	}
}
