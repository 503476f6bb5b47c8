package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/testenv"
)

// PointInTime (MySQL/MariaDB, the server's binary log on): `agent archive`
// streams the binary log into the store while a backup with
// CAIRN_POINT_IN_TIME takes a base; insert A at t1, B at t2, delete A at
// t3; a restore to a second between t2 and t3 has A and B, to latest only
// B; a time before the base and one after the newest archived change are
// refused before the target exists; a base taken while the server is idle
// restores to a time after it (the archiver's proof of quiet); `agent
// delete` removes the archive with the artifacts.
func PointInTime(t *testing.T, e *Env, kind string) {
	if e.DB.Engine() == "postgres" {
		PointInTimePostgres(t, e, kind)
		return
	}
	st := e.NewStore(t, kind)
	db := "pit_" + kind
	job := naming.Job{Namespace: "shop", Name: "pit-" + kind}
	check(t, e.DB.Create(db))
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_at"); e.DB.Drop(db + "_latest"); e.DB.Drop(db + "_early") })
	sql := func(q string) {
		t.Helper()
		if _, err := e.DB.SQL(db, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	sql("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(40) NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")

	// The archiver runs beside the test, as its Deployment would.
	ctx, stop := context.WithCancel(context.Background())
	env := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String(),
		"CAIRN_MAX_SEGMENT_AGE=1s", "CAIRN_SPOOL_DIR="+t.TempDir())
	healthPort, err := testenv.FreePort()
	check(t, err)
	ready := fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, contract.ArchiverReadyPath)
	cmd, _, err := e.Agent.Command(ctx, env, "archive", fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort))
	check(t, err)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stop()
		<-exited
		t.Logf("agent archive:\n%s", lastLines(out.String(), 15))
	})

	// A new archive opens a new binary log file first: a base taken after
	// that is in an archived file.
	check(t, testenv.Poll(30*time.Second, 100*time.Millisecond, func() error {
		if !strings.Contains(out.String(), "reading the binary log") {
			return fmt.Errorf("agent archive has not started reading yet:\n%s", out.String())
		}
		return nil
	}))
	// Ready (its Deployment's probe) once the first segment is archived:
	// with a 1 s segment age, within seconds.
	check(t, testenv.Poll(30*time.Second, 200*time.Millisecond, func() error {
		resp, err := http.Get(ready)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s", ready, resp.StatusCode, body)
		}
		return nil
	}))
	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true"}, "backup"))
	entry, ok := st.Index(t, job).Find(res.Artifact)
	if !ok || entry.BinlogBase == nil || entry.BinlogBase.File == "" {
		t.Fatalf("the base records no binary log position: %+v", entry)
	}

	sql("INSERT INTO orders VALUES (1, 'A')")
	t1 := time.Now()
	waitPast(t, t1.Truncate(time.Second).Add(time.Second))
	sql("INSERT INTO orders VALUES (2, 'B')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	t3 := time.Now()
	check(t, testenv.Poll(60*time.Second, 200*time.Millisecond, func() error {
		select {
		case err := <-exited:
			return fmt.Errorf("agent archive exited: %v\n%s", err, out.String())
		default:
		}
		ix, err := pitr.LoadIndex(context.Background(), st.Open, job.BinlogDir())
		if err != nil {
			return err
		}
		if w := ix.WindowFrom(pitr.Base{File: entry.BinlogBase.File, Pos: entry.BinlogBase.Pos}); w.Latest.Before(t3.Truncate(time.Second).Add(time.Second)) {
			return fmt.Errorf("archived to %s, not past the delete at %s yet", w.Latest, t3)
		}
		return nil
	}))

	rows := func(database string) string {
		t.Helper()
		out, err := e.DB.SQL(database, "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders")
		check(t, err)
		return strings.TrimSpace(out)
	}
	restore := func(target string, to string) testenv.Run {
		t.Helper()
		return e.agent(t, st, target, job, []string{"CAIRN_RECOVERY_TARGET=" + to}, "restore")
	}
	at := mustSucceed(t, restore(db+"_at", between.UTC().Format(time.RFC3339)))
	if got := rows(db + "_at"); got != "0,1,2" {
		t.Errorf("restored to %s (between B and the delete of A): ids %q, want 0,1,2", between.UTC().Format(time.RFC3339), got)
	}
	if !at.RecoveryPoint.Equal(between.UTC()) {
		t.Errorf("recovery point %s, want %s", at.RecoveryPoint, between.UTC())
	}
	latest := mustSucceed(t, restore(db+"_latest", "latest"))
	if got := rows(db + "_latest"); got != "0,2" {
		t.Errorf("restored to latest: ids %q, want 0,2 (A deleted)", got)
	}
	if latest.RecoveryPoint.Before(t3.Truncate(time.Second)) {
		t.Errorf("latest reached %s, before the delete at %s", latest.RecoveryPoint, t3)
	}

	// Before the base (no base is that old) and after the newest archived
	// change: refused, and the target never created.
	for _, to := range []string{entryTime(entry.Start.Add(-time.Hour)), entryTime(time.Now().Add(time.Hour))} {
		r := restore(db+"_early", to)
		mustFail(t, r, "window")
		if _, err := e.DB.SQL(db+"_early", "SELECT 1"); err == nil {
			t.Errorf("a point-in-time restore to %s refused as outside the window created its target", to)
		}
		if r.Code != contract.ExitFailure {
			t.Errorf("refused restore to %s: exit %d", to, r.Code)
		}
	}

	// Retention keeps the log a kept base replays, and no more: a second
	// base, then a prune keeping only it, deletes the segments before its
	// file; the newest state is still recoverable from it.
	base2 := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true"}, "backup"))
	entry2, _ := st.Index(t, job).Find(base2.Artifact)
	if entry2.BinlogBase == nil || entry2.BinlogBase.File <= entry.BinlogBase.File {
		t.Fatalf("the second base is not in a later binary log file: %+v after %+v", entry2.BinlogBase, entry.BinlogBase)
	}
	// The backup reports the archive's window (the BackupJob's
	// status.pointInTime): from the oldest kept base's end to at least
	// the delete of A, no gap.
	if w := base2.PointInTime; w == nil || !w.Earliest.Equal(entry.End.UTC()) || w.Latest.Before(t3.Truncate(time.Second)) ||
		w.Segments == 0 || w.LastSegment == "" || len(w.Gaps) > 0 {
		t.Errorf("window reported by the second base: %+v, want from %s to at least %s, segments, no gap", w, entry.End.UTC(), t3.Truncate(time.Second))
	}
	sql("INSERT INTO orders VALUES (3, 'C')")
	t4 := time.Now()
	check(t, testenv.Poll(60*time.Second, 200*time.Millisecond, func() error {
		ix, err := pitr.LoadIndex(context.Background(), st.Open, job.BinlogDir())
		if err != nil {
			return err
		}
		if w := ix.WindowFrom(pitr.Base{File: entry2.BinlogBase.File}); w.Latest.Before(t4.Truncate(time.Second).Add(time.Second)) {
			return fmt.Errorf("archived to %s, not past C at %s yet", w.Latest, t4)
		}
		return nil
	}))
	if r := e.agent(t, st, db, job, []string{`CAIRN_RETENTION={"keepLast":1}`}, "prune"); r.Code != 0 {
		t.Fatalf("prune: exit %d: %s", r.Code, r.Stderr)
	}
	ix, err := pitr.LoadIndex(context.Background(), st.Open, job.BinlogDir())
	check(t, err)
	if files := ix.Files(); len(files) == 0 || files[0] != entry2.BinlogBase.File {
		t.Errorf("after a prune keeping only the base in %s, the archive holds %v", entry2.BinlogBase.File, files)
	}
	mustSucceed(t, restore(db+"_latest2", "latest"))
	t.Cleanup(func() { e.DB.Drop(db + "_latest2") })
	if got := rows(db + "_latest2"); got != "0,2,3" {
		t.Errorf("restored to latest after the prune: ids %q, want 0,2,3", got)
	}

	// An idle server: nothing written after C. The archiver's proof of
	// quiet keeps the window moving, and a base taken now — in the binary
	// log file the server opened after the newest segment, which nothing
	// fills so it is never archived — restores to a time after it with
	// nothing to replay (a ProtectionPlan's drill at "now minus maxLag" on
	// a quiet database).
	// The restores wrote to the server too: a proof recorded after them
	// says the archive holds all of it.
	written := time.Now()
	check(t, testenv.Poll(60*time.Second, 200*time.Millisecond, func() error {
		ix, err := pitr.LoadIndex(context.Background(), st.Open, job.BinlogDir())
		if err != nil {
			return err
		}
		if ix.Covered == nil || !ix.Covered.At.After(written) {
			return fmt.Errorf("no proof of quiet after %s yet (covered: %+v)", written, ix.Covered)
		}
		return nil
	}))
	base3 := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true"}, "backup"))
	entry3, _ := st.Index(t, job).Find(base3.Artifact)
	if entry3.BinlogBase == nil {
		t.Fatalf("the third base records no binary log position: %+v", entry3)
	}
	quietTo := entry3.End.UTC().Truncate(time.Second).Add(2 * time.Second)
	check(t, testenv.Poll(60*time.Second, 200*time.Millisecond, func() error {
		ix, err := pitr.LoadIndex(context.Background(), st.Open, job.BinlogDir())
		if err != nil {
			return err
		}
		if _, archived := ix.Segments[entry3.BinlogBase.File]; archived {
			return fmt.Errorf("the idle server's file %s was archived: something wrote to the binary log after C (test cannot show the proof of quiet)", entry3.BinlogBase.File)
		}
		if w := ix.WindowFrom(pitr.Base{File: entry3.BinlogBase.File, Pos: entry3.BinlogBase.Pos}); w.Latest.Before(quietTo) {
			return fmt.Errorf("window from the idle base in %s reaches %s, not %s yet (covered: %+v)", entry3.BinlogBase.File, w.Latest, quietTo, ix.Covered)
		}
		return nil
	}))
	quiet := mustSucceed(t, restore(db+"_quiet", quietTo.Format(time.RFC3339)))
	t.Cleanup(func() { e.DB.Drop(db + "_quiet") })
	if got := rows(db + "_quiet"); got != "0,2,3" {
		t.Errorf("restored to %s on the idle server: ids %q, want 0,2,3", quietTo.Format(time.RFC3339), got)
	}
	if !quiet.RecoveryPoint.Equal(quietTo) {
		t.Errorf("recovery point on the idle server %s, want %s", quiet.RecoveryPoint, quietTo)
	}

	// delete takes the archive with the artifacts.
	stop()
	<-exited
	exited <- errors.New("stopped")
	if r := e.agent(t, st, db, job, nil, "delete"); r.Code != 0 {
		t.Fatalf("delete: exit %d: %s", r.Code, r.Stderr)
	}
	if objs, err := st.Open.List(context.Background(), job.BinlogDir()); err != nil || len(objs) > 0 {
		t.Errorf("after delete, %d object(s) left in the binary log archive (%v)", len(objs), err)
	}
}

func entryTime(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// waitPast polls until the clock is past at (binary log times are whole
// seconds: two changes meant for different seconds wait for the next).
func waitPast(t *testing.T, at time.Time) {
	t.Helper()
	check(t, testenv.Poll(5*time.Second, 20*time.Millisecond, func() error {
		if !time.Now().After(at) {
			return errors.New("not yet")
		}
		return nil
	}))
}
