package contract

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	good := `{"artifact":"a/b/c.pgdump.zst","size":12,"checksum":"sha256:` + strings.Repeat("0", 64) +
		`","start":"2026-01-02T03:04:05.123Z","end":"2026-01-02T03:04:06Z","durationSeconds":0.877,"engine":"postgres"}` + "\n"
	tests := []struct {
		name       string
		msg        string
		wantErr    string
		wantFailed string
	}{
		{name: "result", msg: good},
		{name: "failure", msg: `{"error":"backup failed: boom"}`, wantFailed: "backup failed: boom"},
		{name: "empty", msg: "  ", wantErr: "empty"},
		{name: "plain text", msg: "panic: oops", wantErr: "not agent JSON"},
		{name: "no checksum", msg: `{"artifact":"x","size":1}`, wantErr: "lacks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.msg)
			switch {
			case tt.wantFailed != "":
				var f *FailedError
				if !errors.As(err, &f) || f.Reason != tt.wantFailed {
					t.Fatalf("Parse = %v, %v; want failure %q", r, err, tt.wantFailed)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %v, %v; want error %q", r, err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				want := time.Date(2026, 1, 2, 3, 4, 5, 123e6, time.UTC)
				if r.Artifact != "a/b/c.pgdump.zst" || r.Size != 12 || !r.Start.Equal(want) || r.Engine != "postgres" || r.DurationSeconds != 0.877 {
					t.Fatalf("Parse = %+v", r)
				}
			}
		})
	}
}

func TestMarshalShape(t *testing.T) {
	b, err := Marshal(Result{Artifact: "x", Size: 1, Checksum: "sha256:ab", Start: time.Unix(0, 0).UTC(), End: time.Unix(1, 0).UTC(), DurationSeconds: 1, Engine: "mysql"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"artifact":"x","size":1,"checksum":"sha256:ab","start":"1970-01-01T00:00:00Z","end":"1970-01-01T00:00:01Z","durationSeconds":1,"engine":"mysql"}` + "\n"
	if string(b) != want {
		t.Fatalf("Marshal =\n%s want\n%s", b, want)
	}
}

func TestFailureLine(t *testing.T) {
	tests := []struct {
		name, reason string
	}{
		{"short", "boom"},
		{"multi-line", "line one\nline two\r\n\tline three"},
		{"long ascii", strings.Repeat("x", 10000)},
		{"long multibyte", strings.Repeat("渡", 5000)},
		{"long escapes", strings.Repeat("\"\x01<", 3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := FailureLine(tt.reason, CodeRetainedWALOverLimit)
			if len(b) > MaxMessageBytes {
				t.Fatalf("%d bytes > %d", len(b), MaxMessageBytes)
			}
			if strings.Count(string(b), "\n") != 1 || !strings.HasSuffix(string(b), "\n") {
				t.Fatalf("not one line: %q", b)
			}
			if !utf8.Valid(b) {
				t.Fatal("invalid UTF-8")
			}
			_, err := Parse(string(b))
			var f *FailedError
			if !errors.As(err, &f) || f.Reason == "" {
				t.Fatalf("Parse(FailureLine) = %v", err)
			}
			if f.Code != CodeRetainedWALOverLimit {
				t.Fatalf("code %q, want %q", f.Code, CodeRetainedWALOverLimit)
			}
			for _, parse := range []func(string) error{
				func(m string) error { _, err := ParseMigration(m); return err },
				func(m string) error { _, err := ParseCatalog(m); return err },
			} {
				var g *FailedError
				if err := parse(string(b)); !errors.As(err, &g) || *g != *f {
					t.Fatalf("parsers disagree: %v, want %v", err, f)
				}
			}
			if len(tt.reason) < 100 && f.Reason != strings.Join(strings.Fields(tt.reason), " ") {
				t.Fatalf("reason %q, want %q", f.Reason, tt.reason)
			}
		})
	}
}

// A restore with checks reports them, and an old message (without the
// check fields) still parses; the worst case (32 checks with the longest
// names, long values, a long artifact path) fits the termination message.
func TestMarshalResultChecksFit(t *testing.T) {
	old := `{"artifact":"a.pgdump.zst","size":1,"checksum":"sha256:ab","start":"1970-01-01T00:00:00Z","end":"1970-01-01T00:00:01Z","durationSeconds":1,"engine":"mysql"}`
	r, err := Parse(old)
	if err != nil || r.Checks != nil || r.TargetCreated || r.TargetDropped {
		t.Fatalf("old message: %+v, %v", r, err)
	}

	base := Result{Artifact: strings.Repeat("p/", 300) + "x.pgdump.zst", Size: 1, Checksum: "sha256:" + strings.Repeat("f", 64),
		Engine: "postgres", TargetCreated: true, TargetDropped: true}
	small := base
	small.Checks = []CheckResult{{Name: "orders", Passed: true, Value: "12"}, {Name: "rows", Passed: false, Value: "3 tables", Message: "orders: 1 restored, 2 recorded"}}
	b, err := MarshalResult(small)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(string(b))
	if err != nil || len(got.Checks) != 2 || got.Checks[1].Message != small.Checks[1].Message || !got.TargetDropped {
		t.Fatalf("round trip: %+v, %v", got, err)
	}

	big := base
	for i := range 32 {
		big.Checks = append(big.Checks, CheckResult{Name: strings.Repeat("n", 61) + fmt.Sprintf("%02d", i), Passed: i%2 == 0,
			Value: strings.Repeat("väl", 400), Message: strings.Repeat("why ", 300)})
	}
	big.DropError = strings.Repeat("e", 2000)
	b, err = MarshalResult(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxMessageBytes || !utf8.Valid(b) {
		t.Fatalf("%d bytes (valid UTF-8: %v)", len(b), utf8.Valid(b))
	}
	got, err = Parse(string(b))
	if err != nil || len(got.Checks) != 32 {
		t.Fatalf("parse: %v, %d checks", err, len(got.Checks))
	}
	for i, c := range got.Checks {
		if c.Name != big.Checks[i].Name || c.Passed != big.Checks[i].Passed {
			t.Errorf("check %d: %+v, want name %s passed %v", i, c, big.Checks[i].Name, big.Checks[i].Passed)
		}
	}
	if big.Checks[0].Value == "" || !strings.HasPrefix(big.Checks[0].Value, "väl") {
		t.Error("MarshalResult changed its argument's checks")
	}
}

// A failure that names the server (UnsupportedServerVersion) carries it to
// the operator, which records it in status.server; older failures parse
// without one.
func TestFailureLineServer(t *testing.T) {
	b := FailureLineServer("backup failed: unsupported server version: PostgreSQL 18.6 …", CodeUnsupportedServer,
		&ServerInfo{Engine: EnginePostgres, Version: "18.6"})
	if !strings.Contains(string(b), `"server":{"engine":"postgres","version":"18.6"}`) {
		t.Fatalf("line %s has no server", b)
	}
	_, err := Parse(string(b))
	var f *FailedError
	if !errors.As(err, &f) || f.Code != CodeUnsupportedServer || f.Server == nil || *f.Server != (ServerInfo{Engine: "postgres", Version: "18.6"}) {
		t.Fatalf("Parse = %#v", err)
	}
	_, err = Parse(string(FailureLine("boom", "")))
	if !errors.As(err, &f) || f.Server != nil {
		t.Fatalf("Parse(no server) = %#v", err)
	}
}
