package engine

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestDropSettings(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	in := "SET statement_timeout = 0;\nSET transaction_timeout = 0;\nSET lock_timeout = 0;\n" +
		"COPY public.t (a) FROM stdin;\nSET transaction_timeout = 0;\n" + long + "\n\\.\n" +
		"SET transaction_timeout = 0;\r\nCREATE TABLE u ();\n" +
		"COPY public.\"" + long + "\" (a) FROM stdin;\nSET transaction_timeout = 0;\n\\.\nEND"
	want := "SET statement_timeout = 0;\nSET lock_timeout = 0;\n" +
		"COPY public.t (a) FROM stdin;\nSET transaction_timeout = 0;\n" + long + "\n\\.\n" +
		"CREATE TABLE u ();\n" +
		"COPY public.\"" + long + "\" (a) FROM stdin;\nSET transaction_timeout = 0;\n\\.\nEND"
	got, err := io.ReadAll(&dropSettings{r: bufio.NewReaderSize(strings.NewReader(in), 4096)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("filtered script differs (got %d bytes, want %d):\n%.300q", len(got), len(want), got)
	}
}

func TestNeedsScriptRestore(t *testing.T) {
	defer PGVersions(0, 0)
	for _, c := range []struct {
		tools, server int
		want          bool
	}{{15, 15, false}, {17, 15, true}, {18, 13, true}, {18, 17, false}, {17, 0, false}, {0, 15, false}} {
		PGVersions(c.tools, c.server)
		if got := needsScriptRestore(); got != c.want {
			t.Errorf("tools %d, server %d: %v, want %v", c.tools, c.server, got, c.want)
		}
	}
}
