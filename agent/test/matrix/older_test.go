package matrix_test

import (
	"strings"
	"testing"

	"cairn.dev/agent/contract"
)

// TestPostgresRestoreToOlderMajor: an artifact of a newer PostgreSQL
// server, restored into an older one. The older server's own agent image
// (pg_restore older than the pg_dump that wrote it) refuses at once with
// exit 4 and nothing created (unless one image serves both); the source's agent image (its pg_restore
// reads the archive, and into a server older than 17 leaves out SET
// transaction_timeout) restores it, for this schema, with the same rows.
// Every pair of the chosen matrix (ci: pg18 into pg13).
func TestPostgresRestoreToOlderMajor(t *testing.T) {
	pgs := servers(t, "postgres")
	for _, src := range pgs {
		for _, dst := range pgs {
			if dst.PGMajor() >= src.PGMajor() {
				continue
			}
			t.Run(src.Name+"-to-"+dst.Name, func(t *testing.T) {
				from, to := start(t, src), start(t, dst)
				if err := seed(from, "src"); err != nil {
					t.Fatal(err)
				}
				want := mustFingerprint(t, from, "src")
				dir := store(t)
				job := "shop/downgrade-" + src.Name + "-" + dst.Name
				mustReport(t, mustSucceed(t, agent(t, src.Agent, dir, from, "src", job, "backup")), src)

				if dst.Agent == src.Agent {
					// One image serves both (PostgreSQL 13 by the 15 image): no refusal.
					mustReport(t, mustSucceed(t, agent(t, src.Agent, dir, to, "downgraded", job, "restore")), dst)
					if got := mustFingerprint(t, to, "downgraded"); got != want {
						t.Fatalf("PostgreSQL %s restored from %s differs:\nsource:\n%s\nrestored:\n%s", dst.Major, src.Major, want, got)
					}
					return
				}
				r := agent(t, dst.Agent, dir, to, "refused", job, "restore")
				_, perr := contract.Parse(r.TermLog)
				f, ok := perr.(*contract.FailedError)
				if r.Code != contract.ExitUnsupported || !ok || f.Code != contract.CodeUnsupportedServer ||
					!strings.Contains(f.Reason, "cannot read an archive of PostgreSQL "+src.Major+".") {
					t.Fatalf("restore by PostgreSQL %s's image of an artifact of %s: exit %d, %q; want exit 4 naming the archive's source", dst.Major, src.Major, r.Code, r.TermLog)
				}
				if n, err := to.SQL("", "SELECT count(*) FROM pg_database WHERE datname = 'refused'"); err != nil || n != "0" {
					t.Fatalf("the refused restore created its target: %q, %v", n, err)
				}

				mustReport(t, mustSucceed(t, agent(t, src.Agent, dir, to, "downgraded", job, "restore")), dst)
				if got := mustFingerprint(t, to, "downgraded"); got != want {
					t.Fatalf("PostgreSQL %s restored from %s differs:\nsource:\n%s\nrestored:\n%s", dst.Major, src.Major, want, got)
				}
			})
		}
	}
}
