package engine

import (
	"strings"
	"testing"
)

// The tools' conninfo asks libpq not to send the password in clear when
// their libpq knows how (16+), and says nothing libpq 15 would refuse.
func TestToolsNoCleartext(t *testing.T) {
	defer PGVersions(0, 0)
	for _, tc := range []struct {
		tools int
		want  bool
	}{{0, false}, {13, false}, {15, false}, {16, true}, {17, true}, {18, true}} {
		PGVersions(tc.tools, 15)
		args := (&Postgres{Conn: Conn{Host: "db", Port: 5432, User: "u"}}).connArgs("d")
		if got := strings.Contains(strings.Join(args, " "), "require_auth='!password'"); got != tc.want {
			t.Errorf("tools of %d: conninfo %q, require_auth there: %v, want %v", tc.tools, args, got, tc.want)
		}
	}
}
