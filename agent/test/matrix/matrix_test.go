// Package matrix_test runs the agent's version-sensitive paths against real
// servers of every version of the matrix (docs/compatibility.md) chosen by
// CAIRN_DB_MATRIX (agent/internal/testenv): each server a container of an
// image built by `make db-images` (or the host's PostgreSQL 15 / MariaDB
// 10.11), each agent run a container of the agent image whose tools serve
// that server (`make images`, `make agent-images`), as a Job's pod runs it.
// A missing image fails the test with the make target that builds it.
package matrix_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/testenv"
)

const (
	user     = "cairn"
	password = "db-PASSWORD-matrix-5b8d3c1f-do-not-print"
)

func servers(t *testing.T, engine string) []testenv.MatrixServer {
	t.Helper()
	s, err := testenv.MatrixServers(engine)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T, s testenv.MatrixServer) testenv.DB {
	t.Helper()
	db, err := testenv.StartMatrix(s, user, password, false)
	if err != nil {
		t.Fatalf("start %s: %v", s.Name, err)
	}
	t.Cleanup(db.Stop)
	return db
}

// store is a new PVC store folder, writable by the agent's user.
func store(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// agent runs image's agent against database name of db with the PVC
// store dir, for job.
func agent(t *testing.T, image, dir string, db testenv.DB, name, job string, args ...string) testenv.Run {
	t.Helper()
	return agentEnv(t, image, dir, db, name, job, nil, args...)
}

// agentEnv is agent with extra environment.
func agentEnv(t *testing.T, image, dir string, db testenv.DB, name, job string, extra []string, args ...string) testenv.Run {
	t.Helper()
	env := append(append(db.AgentEnv(name), "CAIRN_BACKUPJOB="+job, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+dir, "CAIRN_LOG_LEVEL=debug"), extra...)
	r := (&testenv.AgentImage{Image: image, Dirs: []string{dir}}).Run(env, args...)
	t.Logf("agent %s (%s) against %s: exit %d in %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), image, db.Server().Name,
		r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
	if strings.Contains(r.Stdout+r.Stderr+r.TermLog, password) {
		t.Errorf("the database password is in the agent's output")
	}
	return r
}

func mustSucceed(t *testing.T, r testenv.Run) *contract.Result {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("agent %v failed with exit %d: %s", r.Args, r.Code, r.Stderr)
	}
	res, err := r.Result()
	if err != nil {
		t.Fatalf("termination message %q: %v", r.TermLog, err)
	}
	return res
}

// mustReport checks the server a result reports is s.
func mustReport(t *testing.T, res *contract.Result, s testenv.MatrixServer) {
	t.Helper()
	if res.Server == nil || res.Server.Engine != s.Engine || !strings.HasPrefix(res.Server.Version, s.Major+".") {
		t.Fatalf("result reports server %+v, want %s %s.x", res.Server, s.Engine, s.Major)
	}
}

func mustFingerprint(t *testing.T, db testenv.DB, name string) string {
	t.Helper()
	fp, err := fingerprint(db, name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fp, "items: 5000 ") || !strings.Contains(fp, "orders: 3000 ") {
		t.Fatalf("%s on %s holds unexpected rows:\n%s", name, db.Server().Name, fp)
	}
	return fp
}

// TestRoundTrip: on every server, a backup by the agent image of its
// version, then a restore into a new database of the same server, holds
// the same rows (counts and checksums); both results report the server.
// MySQL's server runs with GTIDs on and the agent's user authenticates
// with caching_sha2_password.
func TestRoundTrip(t *testing.T) {
	for _, s := range servers(t, "") {
		t.Run(s.Name, func(t *testing.T) { roundTrip(t, s, s.Agent) })
	}
}

// TestRoundTripOtherImages: the round trip by another agent image whose
// tools also serve the server — MariaDB's servers by trixie's MariaDB 11.8
// client and bullseye's 10.5 client — when the server is chosen and the
// image is one the chosen matrix uses (ci: by bullseye's).
func TestRoundTripOtherImages(t *testing.T) {
	chosen := servers(t, "")
	ran := 0
	for _, c := range []struct{ server, image, tools string }{
		{"mariadb10.11", "cairn.local/agent:dev-pg17", "mariadb11.8"},
		{"mariadb11.8", "cairn.local/agent:dev-pg17", "mariadb11.8"},
		{"mariadb11.8", "cairn.local/agent:dev-pg13", "mariadb10.5"},
	} {
		s, err := testenv.MatrixServerNamed(c.server)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(chosen, func(x testenv.MatrixServer) bool { return x.Name == c.server }) || !usesImage(chosen, c.image) {
			continue
		}
		ran++
		t.Run(c.server+"-with-"+c.tools+"-client", func(t *testing.T) { roundTrip(t, s, c.image) })
	}
	t.Logf("%d pairs of the chosen matrix (%s)", ran, testenv.EnvMatrix)
}

func roundTrip(t *testing.T, s testenv.MatrixServer, image string) {
	db := start(t, s)
	if err := seed(db, "src"); err != nil {
		t.Fatal(err)
	}
	want := mustFingerprint(t, db, "src")
	dir := store(t)
	job := "shop/roundtrip-" + strings.ReplaceAll(s.Name, ".", "-")
	mustReport(t, mustSucceed(t, agent(t, image, dir, db, "src", job, "backup")), s)
	mustReport(t, mustSucceed(t, agent(t, image, dir, db, "dst", job, "restore")), s)
	if got := mustFingerprint(t, db, "dst"); got != want {
		t.Fatalf("restored database differs from the source:\nsource:\n%s\nrestored:\n%s", want, got)
	}
}

// TestPostgresRestoreToNewerMajor: the upgrade path. An artifact of each
// older PostgreSQL server (dumped by the agent image of its own version)
// restores into each newer server of 17 and up, through that server's
// agent image, with the same rows.
func TestPostgresRestoreToNewerMajor(t *testing.T) {
	pgs := servers(t, "postgres")
	for _, src := range pgs {
		for _, dst := range pgs {
			if dst.PGMajor() < 17 || dst.PGMajor() <= src.PGMajor() {
				continue
			}
			t.Run(src.Name+"-to-"+dst.Name, func(t *testing.T) {
				from, to := start(t, src), start(t, dst)
				if err := seed(from, "src"); err != nil {
					t.Fatal(err)
				}
				want := mustFingerprint(t, from, "src")
				dir := store(t)
				job := "shop/upgrade-" + src.Name + "-" + dst.Name
				mustReport(t, mustSucceed(t, agent(t, src.Agent, dir, from, "src", job, "backup")), src)
				mustReport(t, mustSucceed(t, agent(t, dst.Agent, dir, to, "upgraded", job, "restore")), dst)
				if got := mustFingerprint(t, to, "upgraded"); got != want {
					t.Fatalf("PostgreSQL %s restored from %s differs:\nsource:\n%s\nrestored:\n%s", dst.Major, src.Major, want, got)
				}
			})
		}
	}
}
