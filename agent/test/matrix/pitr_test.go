package matrix_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// TestPointInTimePostgres: on each PostgreSQL server, with the agent
// image of exactly its major (PITRAgent: its PostgreSQL server replays the WAL:
// the base records its source's version and the restore picks exactly
// that major): `agent archive` streams the WAL into the store while a
// backup takes a physical base; insert A, insert B, delete A; a restore to
// a second between B and the delete has A and B.
func TestPointInTimePostgres(t *testing.T) {
	for _, s := range servers(t, "postgres") {
		t.Run(s.Name, func(t *testing.T) { pointInTimePG(t, s) })
	}
}

func pointInTimePG(t *testing.T, s testenv.MatrixServer) {
	db := start(t, s)
	sql := func(q string) string {
		t.Helper()
		out, err := db.SQL("orders", q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	if err := createDB(db, "orders"); err != nil {
		t.Fatal(err)
	}
	sql("CREATE TABLE orders (id int PRIMARY KEY, note text NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")
	dir := store(t)
	job := naming.Job{Namespace: "shop", Name: "pit-" + s.Name}
	env := append(db.AgentEnv("orders"), "CAIRN_BACKUPJOB="+job.String(), "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+dir)

	health, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	img := &testenv.AgentImage{Image: s.PITRAgent, Dirs: []string{dir}}
	arch, err := img.Start(append(env, contract.EnvMaxSegmentAge+"=1s", contract.EnvSpoolDir+"=/tmp/spool"),
		"archive", fmt.Sprintf("--health-addr=127.0.0.1:%d", health))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t.Logf("agent archive:\n%s", arch.Logs(3000))
		arch.Remove()
	})
	ready := fmt.Sprintf("http://127.0.0.1:%d%s", health, contract.ArchiverReadyPath)
	if err := testenv.Poll(3*time.Minute, 200*time.Millisecond, func() error {
		if err := arch.Running(); err != nil {
			return err
		}
		resp, err := http.Get(ready)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d", ready, resp.StatusCode)
		}
		return nil
	}); err != nil {
		t.Fatalf("the archiver is not ready: %v\n%s", err, arch.Logs(3000))
	}

	base := mustSucceed(t, agent(t, s.PITRAgent, dir, db, "orders", job.String(), "backup", "--point-in-time"))
	mustReport(t, base, s)
	sql("INSERT INTO orders VALUES (1, 'A')")
	waitPast(t, time.Now().Truncate(time.Second).Add(time.Second))
	sql("INSERT INTO orders VALUES (2, 'B')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	t3 := time.Now()

	// The restore refuses a time past the newest archived change
	// (OutsideRecoverableWindow, nothing written) until the archiver has
	// stored the WAL past it: polled.
	var at *contract.Result
	target := between.UTC().Format(time.RFC3339)
	if err := testenv.Poll(2*time.Minute, time.Second, func() error {
		r := agentEnv(t, s.PITRAgent, dir, db, "orders_at", job.String(), []string{contract.EnvRecoveryTarget + "=" + target}, "restore")
		if r.Code == 0 {
			at = mustSucceed(t, r)
			return nil
		}
		_, perr := contract.Parse(r.TermLog)
		if f, ok := perr.(*contract.FailedError); ok && f.Code == contract.CodeOutsideWindow {
			return fmt.Errorf("not archived past %s yet: %s", target, f.Reason)
		}
		t.Fatalf("restore to %s failed with exit %d: %s", target, r.Code, r.Stderr)
		return nil
	}); err != nil {
		t.Fatalf("%v (deleted A at %s)\n%s", err, t3.UTC().Format(time.RFC3339Nano), arch.Logs(3000))
	}
	mustReport(t, at, s)
	if !at.RecoveryPoint.Equal(between.UTC()) {
		t.Errorf("recovery point %s, want %s", at.RecoveryPoint, between.UTC())
	}
	// An image without the server of exactly the base's major refuses the
	// recovery at once (pg_dump 18 could read the recovered data, but
	// PostgreSQL 18 cannot replay 13's WAL): exit 4, nothing written.
	if newest, _ := testenv.MatrixServerNamed("pg18"); newest.PITRAgent != s.PITRAgent {
		r := agentEnv(t, newest.PITRAgent, dir, db, "orders_refused", job.String(), []string{contract.EnvRecoveryTarget + "=" + target}, "restore")
		_, perr := contract.Parse(r.TermLog)
		f, ok := perr.(*contract.FailedError)
		if r.Code != contract.ExitUnsupported || !ok || f.Code != contract.CodeUnsupportedServer ||
			!strings.Contains(f.Reason, "PostgreSQL "+s.Major+".") || !strings.Contains(f.Reason, "point-in-time recovery of PostgreSQL 18 only") {
			t.Errorf("recovery of a PostgreSQL %s base by PostgreSQL 18's image: exit %d, %q; want exit 4 naming both majors", s.Major, r.Code, r.TermLog)
		}
		if n, err := db.SQL("", "SELECT count(*) FROM pg_database WHERE datname = 'orders_refused'"); err != nil || n != "0" {
			t.Errorf("the refused recovery created its target: %q, %v", n, err)
		}
	}
	got, err := db.SQL("orders_at", "SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM orders")
	if err != nil || got != "0:before the base,1:A,2:B" {
		t.Fatalf("restored to %s (between B and the delete of A): rows %q (%v), want A and B", between.UTC().Format(time.RFC3339), got, err)
	}
}

func waitPast(t *testing.T, at time.Time) {
	t.Helper()
	if err := testenv.Poll(5*time.Second, 20*time.Millisecond, func() error {
		if !time.Now().After(at) {
			return fmt.Errorf("not yet %s", at)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
