package matrix_test

import (
	"slices"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/testenv"
)

// TestNewerToolsIntoSourceMajor: an artifact made by newer tools than the
// server (pg_dump 17 or 18 of an older server: what an agent image newer
// than the database makes) restores, by the same newer tools, into a
// server of the source's own major, with the same rows — PostgreSQL 17's
// and 18's pg_dump and pg_restore know SET transaction_timeout, which no
// server before 17 does. Every older server of the chosen matrix with
// the agent image of every newer one (ci: pg13 with pg18's).
func TestNewerToolsIntoSourceMajor(t *testing.T) {
	pgs := servers(t, "postgres")
	for _, s := range pgs {
		for _, newer := range pgs {
			if s.PGMajor() >= 17 || newer.PGMajor() < 17 {
				continue
			}
			t.Run(s.Name+"-with-"+newer.Name+"-tools", func(t *testing.T) {
				img := newer.Agent
				db := start(t, s)
				if err := seed(db, "src"); err != nil {
					t.Fatal(err)
				}
				want := mustFingerprint(t, db, "src")
				dir := store(t)
				job := "shop/newer-tools-" + s.Name + "-" + newer.Name
				mustReport(t, mustSucceed(t, agent(t, img, dir, db, "src", job, "backup")), s)
				mustReport(t, mustSucceed(t, agent(t, img, dir, db, "dst", job, "restore")), s)
				if got := mustFingerprint(t, db, "dst"); got != want {
					t.Fatalf("restored database differs from the source:\nsource:\n%s\nrestored:\n%s", want, got)
				}
			})
		}
	}
}

// TestUnsupportedServer: an agent image whose tools cannot serve the
// server (PostgreSQL tools older than the server; MariaDB's tools for an
// Oracle MySQL server) fails the backup and the restore at once with exit
// code 4 and the UnsupportedServerVersion code, a reason naming the
// server's version and the range the image supports, and writes nothing:
// no artifact, no target database.
func TestUnsupportedServer(t *testing.T) {
	// Each case runs when its server is chosen and its image is one the
	// chosen matrix uses (ci: the first and the fourth).
	cases := []struct {
		server, image, tools, want string
	}{
		{"pg18", "cairn.local/agent:dev", "pg15", "it supports PostgreSQL 15 and older"},
		{"pg18", "cairn.local/agent:dev-pg17", "pg17", "it supports PostgreSQL 17 and older"},
		{"pg18", "cairn.local/agent:dev-pg13", "pg13", "it supports PostgreSQL 13 and older"},
		{"mysql9.7", "cairn.local/agent:dev", "mariadb10.11", "it supports MariaDB (its 10.11 client tools)"},
		{"mysql9.7", "cairn.local/agent:dev-pg17", "mariadb11.8", "it supports MariaDB (its 11.8 client tools)"},
	}
	chosen := servers(t, "")
	for _, c := range cases {
		if !slices.ContainsFunc(chosen, func(s testenv.MatrixServer) bool { return s.Name == c.server }) ||
			!usesImage(chosen, c.image) {
			continue
		}
		s, err := testenv.MatrixServerNamed(c.server)
		if err != nil {
			t.Fatal(err)
		}
		image, imageFor := c.image, c.tools
		t.Run(c.server+"-with-"+imageFor+"-tools", func(t *testing.T) {
			db := start(t, s)
			if err := seed(db, "src"); err != nil {
				t.Fatal(err)
			}
			dir := store(t)
			job := "shop/unsupported-" + strings.ReplaceAll(s.Name+"-"+imageFor, ".", "-")
			check := func(r testenv.Run) {
				t.Helper()
				if r.Code != contract.ExitUnsupported {
					t.Fatalf("exit %d, want %d (ExitUnsupported): %s", r.Code, contract.ExitUnsupported, r.Stderr)
				}
				_, err := contract.Parse(r.TermLog)
				f, ok := err.(*contract.FailedError)
				if !ok || f.Code != contract.CodeUnsupportedServer {
					t.Fatalf("termination message %q: want code %s", r.TermLog, contract.CodeUnsupportedServer)
				}
				name := map[string]string{"postgres": "PostgreSQL ", "mysql": "MySQL "}[s.Engine]
				if !strings.Contains(f.Reason, "unsupported server version: "+name+s.Major+".") || !strings.Contains(f.Reason, c.want) {
					t.Fatalf("reason %q: want the server's version (%s%s.x) and %q", f.Reason, name, s.Major, c.want)
				}
			}
			check(agent(t, image, dir, db, "src", job, "backup"))
			if out, err := testenv.ListFiles(dir); err != nil || len(out) != 0 {
				t.Fatalf("the failed backup wrote %v (%v)", out, err)
			}
			// A restore: from an artifact of tools that serve the server.
			mustSucceed(t, agent(t, s.Agent, dir, db, "src", job, "backup"))
			check(agent(t, image, dir, db, "dst", job, "restore"))
			q := map[string]string{"postgres": "SELECT count(*) FROM pg_database WHERE datname = 'dst'",
				"mysql": "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'dst'"}[s.Engine]
			if n, err := db.SQL("", q); err != nil || n != "0" {
				t.Fatalf("the refused restore created its target: %q, %v", n, err)
			}
		})
	}
}

// usesImage: one of the chosen servers is served by image.
func usesImage(chosen []testenv.MatrixServer, image string) bool {
	return slices.ContainsFunc(chosen, func(s testenv.MatrixServer) bool { return s.Agent == image || s.PITRAgent == image })
}
