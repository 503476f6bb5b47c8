package suite

import (
	"context"
	"encoding/json"
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

// archiver is `agent archive` running beside a test, as its Deployment
// would.
type archiver struct {
	out    *syncBuffer
	stop   func()
	exited chan error
	// ready is the archiver's readiness endpoint.
	ready string
}

func (e *Env) startArchiver(t *testing.T, st *Store, db string, job naming.Job, spool string, extra ...string) *archiver {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	env := append(append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String(),
		"CAIRN_MAX_SEGMENT_AGE=1s", "CAIRN_SPOOL_DIR="+spool), extra...)
	healthPort, err := testenv.FreePort()
	check(t, err)
	cmd, _, err := e.Agent.Command(ctx, env, "archive", fmt.Sprintf("--health-addr=127.0.0.1:%d", healthPort))
	check(t, err)
	a := &archiver{out: &syncBuffer{}, stop: stop, exited: make(chan error, 1),
		ready: fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, contract.ArchiverReadyPath)}
	cmd.Stdout, cmd.Stderr = a.out, a.out
	check(t, cmd.Start())
	go func() { a.exited <- cmd.Wait() }()
	check(t, testenv.Poll(30*time.Second, 100*time.Millisecond, func() error {
		select {
		case err := <-a.exited:
			a.exited <- err
			return fmt.Errorf("agent archive exited: %v\n%s", err, a.out.String())
		default:
		}
		if out := a.out.String(); !strings.Contains(out, "reading the write-ahead log") && !strings.Contains(out, "reading the binary log") {
			return fmt.Errorf("agent archive has not started reading yet:\n%s", a.out.String())
		}
		return nil
	}))
	// Ready (its Deployment's probe) once the segment its first switch
	// closed is stored: within seconds with a 1 s segment age, idle
	// database or not. (Once, on a machine at load 20, not within a
	// minute: the bound is generous and the failure shows the log.)
	check(t, testenv.Poll(3*time.Minute, 200*time.Millisecond, func() error {
		resp, err := http.Get(a.ready)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d %s\n%s", a.ready, resp.StatusCode, body, lastLines(a.out.String(), 60))
		}
		return nil
	}))
	return a
}

// halt stops the archiver and waits for it (once).
func (a *archiver) halt(t *testing.T) {
	if a.stop == nil {
		return
	}
	a.stop()
	<-a.exited
	t.Logf("agent archive:\n%s", lastLines(a.out.String(), 15))
	a.stop = nil
}

// PointInTimePostgres: `agent archive` streams the WAL into the store (a
// physical slot, pg_receivewal, segments closed every second) while a
// backup with CAIRN_POINT_IN_TIME takes a physical base; insert A at t1,
// ALTER TABLE … ADD COLUMN and a sequence then insert B at t2, delete A
// at t3: a restore to a second between t2 and t3 has A and B with the new
// column and the sequence's value, to latest only B; a time before the
// base and one after the newest archived change are refused before the
// target exists; the archiver stopped and started again leaves no gap; a
// plain restore of the base alone gives the state at its end; the slot is
// dropped by archive-status past its limit (and created again, the gap
// reported); a segment deleted by hand is a gap that refuses a restore
// across it; prune keeps the WAL a kept base needs; delete removes it.
func PointInTimePostgres(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "pitpg_" + kind
	job := naming.Job{Namespace: "shop", Name: "pitpg-" + kind}
	check(t, e.DB.Create(db))
	targets := []string{"_at", "_latest", "_early", "_base", "_resumed", "_gap", "_latest2"}
	t.Cleanup(func() {
		e.DB.Drop(db)
		for _, s := range targets {
			e.DB.Drop(db + s)
		}
		e.DB.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+pitr.SlotName(job.String())+"'")
	})
	sql := func(q string) string {
		t.Helper()
		out, err := e.DB.SQL(db, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return out
	}
	sql("CREATE TABLE orders (id int PRIMARY KEY, note text NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")

	spool := t.TempDir()
	arch := e.startArchiver(t, st, db, job, spool)
	t.Cleanup(func() { arch.halt(t) })
	var slotExists = func() bool {
		out, err := e.DB.SQL("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+pitr.SlotName(job.String())+"' AND slot_type = 'physical'")
		check(t, err)
		return out == "1"
	}
	if !slotExists() {
		t.Fatalf("the archiver created no physical slot %s", pitr.SlotName(job.String()))
	}

	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true"}, "backup"))
	entry, ok := st.Index(t, job).Find(res.Artifact[strings.LastIndex(res.Artifact, "/")+1:])
	if !ok || entry.WALBase == nil || entry.WALBase.File == "" || !naming.PhysicalBase(entry.Name) {
		t.Fatalf("the base is no physical base with its WAL start: %+v", entry)
	}
	base := pitr.Base{File: entry.WALBase.File}
	// The base's run reports the archive's window (the BackupJob's
	// status.pointInTime), as a MySQL base's does.
	if w := res.PointInTime; w == nil || !w.Earliest.Equal(entry.End.UTC()) || w.Segments == 0 || w.LastSegment == "" || len(w.Gaps) > 0 {
		t.Errorf("window reported by the physical base: %+v, want from %s, segments, no gap", w, entry.End.UTC())
	}

	sql("INSERT INTO orders VALUES (1, 'A')")
	t1 := time.Now()
	waitPast(t, t1.Truncate(time.Second).Add(time.Second))
	sql("ALTER TABLE orders ADD COLUMN extra text NOT NULL DEFAULT 'old'; CREATE SEQUENCE order_no START 100")
	sql("SELECT nextval('order_no'); SELECT nextval('order_no')")
	sql("INSERT INTO orders VALUES (2, 'B', 'new')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	t3 := time.Now()
	waitArchived := func(b pitr.Base, past time.Time) {
		t.Helper()
		check(t, testenv.Poll(90*time.Second, 200*time.Millisecond, func() error {
			select {
			case err := <-arch.exited:
				arch.exited <- err
				return fmt.Errorf("agent archive exited: %v\n%s", err, arch.out.String())
			default:
			}
			ix, err := pitr.LoadIndex(context.Background(), st.Open, job.WALDir())
			if err != nil {
				return err
			}
			if w := ix.WindowFrom(b); w.Latest.Before(past) {
				return fmt.Errorf("archived to %s (%s), not past %s yet", w.Latest, w.Through, past)
			}
			return nil
		}))
	}
	waitArchived(base, t3)

	rows := func(database string) string {
		t.Helper()
		out, err := e.DB.SQL(database, "SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM orders")
		check(t, err)
		return out
	}
	restore := func(target, to string) testenv.Run {
		t.Helper()
		extra := []string{}
		if to != "" {
			extra = append(extra, "CAIRN_RECOVERY_TARGET="+to)
		}
		return e.agent(t, st, target, job, extra, "restore")
	}
	at := mustSucceed(t, restore(db+"_at", between.UTC().Format(time.RFC3339)))
	if got := rows(db + "_at"); got != "0:before the base,1:A,2:B" {
		t.Errorf("restored to %s (between B and the delete of A): rows %q, want A and B", between.UTC().Format(time.RFC3339), got)
	}
	// A sequence's WAL record logs ahead (32 values): the recovered
	// sequence continues past them, never giving a value twice.
	if got, err := e.DB.SQL(db+"_at", "SELECT string_agg(id || '=' || extra, ',' ORDER BY id) FROM orders; SELECT nextval('order_no') > 101"); err != nil || got != "0=old,1=old,2=new\nt" {
		t.Errorf("restored to between: the new column and the sequence: %q (%v), want 0=old,1=old,2=new and a next value past 101", got, err)
	}
	if !at.RecoveryPoint.Equal(between.UTC()) {
		t.Errorf("recovery point %s, want %s", at.RecoveryPoint, between.UTC())
	}
	latest := mustSucceed(t, restore(db+"_latest", "latest"))
	if got := rows(db + "_latest"); got != "0:before the base,2:B" {
		t.Errorf("restored to latest: rows %q, want B only (A deleted)", got)
	}
	if latest.RecoveryPoint.Before(t3.Truncate(time.Second)) {
		t.Errorf("latest reached %s, before the delete at %s", latest.RecoveryPoint, t3)
	}

	// Before the base and after the newest archived change: refused, and
	// the target never created.
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

	// Into the source database itself: refused after the recovery, before
	// anything is written (the recovered cluster is the source's copy,
	// the target is the source).
	before := rows(db)
	r := restore(db, between.UTC().Format(time.RFC3339))
	mustFail(t, r, "is the source")
	if r.Code != contract.ExitUsage {
		t.Errorf("a point-in-time restore into the source: exit %d, want %d", r.Code, contract.ExitUsage)
	}
	if got := rows(db); got != before {
		t.Errorf("a refused restore into the source changed it: %q, was %q", got, before)
	}

	// The base alone, without a target: its own consistent point.
	mustSucceed(t, restore(db+"_base", ""))
	if got := rows(db + "_base"); got != "0:before the base" {
		t.Errorf("plain restore of the base: rows %q, want only the row from before it", got)
	}

	// The archiver stopped, a write, started again: it resumes after the
	// newest stored segment (its slot kept the WAL), no gap.
	arch.halt(t)
	sql("INSERT INTO orders (id, note) VALUES (3, 'C while the archiver was away')")
	tC := time.Now()
	arch = e.startArchiver(t, st, db, job, t.TempDir())
	waitArchived(base, tC)
	ix, err := pitr.LoadIndex(context.Background(), st.Open, job.WALDir())
	check(t, err)
	if gaps := ix.Gaps(); len(gaps) > 0 {
		t.Errorf("after the archiver was stopped and started again, the archive has gaps: %v", gaps)
	}
	mustSucceed(t, restore(db+"_resumed", "latest"))
	if got := rows(db + "_resumed"); got != "0:before the base,2:B,3:C while the archiver was away" {
		t.Errorf("restored to latest after the archiver's restart: rows %q, want B and C", got)
	}

	// The slot bound: with the archiver away and the WAL moving on,
	// archive-status with a limit drops the slot; the archiver creates it
	// again from now, and the archive shows the gap.
	arch.halt(t)
	status := func(limit string) contract.ArchiveStatus {
		t.Helper()
		r := e.agent(t, st, db, job, []string{"CAIRN_ARCHIVE_MAX_RETAINED_WAL_BYTES=" + limit}, "archive-status")
		if r.Code != 0 {
			t.Fatalf("archive-status: exit %d: %s", r.Code, r.Stderr)
		}
		var s contract.ArchiveStatus
		check(t, json.Unmarshal([]byte(r.TermLog), &s))
		return s
	}
	for i := 0; i < 3; i++ {
		sql(fmt.Sprintf("INSERT INTO orders (id, note) VALUES (%d, 'while away'); SELECT pg_switch_wal()", 10+i))
	}
	if s := status("0"); !s.SlotExists || s.SlotDropped || s.RetainedWALBytes < 2<<20 || len(s.Gaps) > 0 {
		t.Errorf("archive-status without a limit: %+v, want the slot kept, retaining the segments switched since, no gap", s)
	}
	if s := status("1048576"); !s.SlotDropped {
		t.Errorf("archive-status with a 1 MiB limit: %+v, want the slot dropped", s)
	}
	if slotExists() {
		t.Fatal("the slot is still on the source after archive-status dropped it")
	}
	// No slot holds the WAL now: a checkpoint lets the server remove it.
	sql("CHECKPOINT")
	sql("INSERT INTO orders (id, note) VALUES (20, 'after the drop')")
	tD := time.Now()
	arch = e.startArchiver(t, st, db, job, t.TempDir())
	if !slotExists() {
		t.Fatal("the archiver did not create its slot again")
	}
	check(t, testenv.Poll(60*time.Second, 200*time.Millisecond, func() error {
		if s := status("0"); len(s.Gaps) == 0 || !s.LatestCovered.After(tD.Truncate(time.Second)) {
			return fmt.Errorf("archive-status %+v: want a gap and the newest write archived", s)
		}
		return nil
	}))
	r = restore(db+"_gap", "latest")
	mustFail(t, r, "gap")
	if _, err := e.DB.SQL(db+"_gap", "SELECT 1"); err == nil {
		t.Error("a restore across the gap created its target")
	}

	// A second base after the gap: a restore from it works; a prune
	// keeping only it deletes the WAL before it.
	base2res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true"}, "backup"))
	entry2, _ := st.Index(t, job).Find(base2res.Artifact[strings.LastIndex(base2res.Artifact, "/")+1:])
	if entry2.WALBase == nil || entry2.WALBase.File <= entry.WALBase.File {
		t.Fatalf("the second base does not start in a later segment: %+v after %+v", entry2.WALBase, entry.WALBase)
	}
	sql("INSERT INTO orders (id, note) VALUES (30, 'E')")
	tE := time.Now()
	waitArchived(pitr.Base{File: entry2.WALBase.File}, tE)
	if r := e.agent(t, st, db, job, []string{`CAIRN_RETENTION={"keepLast":1}`}, "prune"); r.Code != 0 {
		t.Fatalf("prune: exit %d: %s", r.Code, r.Stderr)
	}
	ix, err = pitr.LoadIndex(context.Background(), st.Open, job.WALDir())
	check(t, err)
	if files := ix.Files(); len(files) == 0 || files[0] != entry2.WALBase.File || len(ix.Gaps()) > 0 {
		t.Errorf("after a prune keeping only the base in %s, the archive holds %v (gaps %v)", entry2.WALBase.File, files, ix.Gaps())
	}
	mustSucceed(t, restore(db+"_latest2", "latest"))
	if got := rows(db + "_latest2"); !strings.HasSuffix(got, "20:after the drop,30:E") {
		t.Errorf("restored to latest from the second base: rows %q, want it to end with the writes after the drop", got)
	}

	// A segment deleted by hand: a gap, named; a restore across it refused
	// before its target exists.
	for i := 0; i < 3; i++ {
		sql(fmt.Sprintf("INSERT INTO orders (id, note) VALUES (%d, 'F'); SELECT pg_switch_wal()", 40+i))
	}
	waitArchived(pitr.Base{File: entry2.WALBase.File}, time.Now())
	ix, err = pitr.LoadIndex(context.Background(), st.Open, job.WALDir())
	check(t, err)
	files := ix.Files()
	if len(files) < 3 {
		t.Fatalf("too few segments to delete a middle one: %v", files)
	}
	victim := files[len(files)/2]
	for _, k := range pitr.SegmentKeys(job.WALDir(), victim) {
		check(t, st.Open.Delete(context.Background(), k))
	}
	if s := status("0"); len(s.Gaps) != 1 || !strings.Contains(s.Gaps[0], victim) {
		t.Errorf("after deleting segment %s by hand, archive-status reports gaps %v", victim, s.Gaps)
	}
	e.DB.Drop(db + "_gap")
	r = restore(db+"_gap", "latest")
	if reason := mustFail(t, r, "gap"); !strings.Contains(reason, victim) {
		t.Errorf("the refusal does not name the missing segment %s: %s", victim, reason)
	}
	if _, err := e.DB.SQL(db+"_gap", "SELECT 1"); err == nil {
		t.Error("a restore across the deleted segment created its target")
	}

	// Point-in-time off (or the BackupJob deleted), the archiver gone:
	// archive-status asked to release drops the slot whatever it retains
	// (nothing will advance it again); without the ask a small slot stays.
	arch.halt(t)
	if s := status("0"); !s.SlotExists || s.SlotReleased {
		t.Fatalf("archive-status before the release: %+v, want the slot there", s)
	}
	rel := e.agent(t, st, db, job, []string{"CAIRN_ARCHIVE_RELEASE_SLOT=true"}, "archive-status")
	if rel.Code != 0 {
		t.Fatalf("archive-status releasing the slot: exit %d: %s", rel.Code, rel.Stderr)
	}
	var released contract.ArchiveStatus
	check(t, json.Unmarshal([]byte(rel.TermLog), &released))
	if !released.SlotReleased || released.SlotDropped {
		t.Errorf("archive-status releasing the slot: %+v, want slotReleased (not slotDropped: not for its size)", released)
	}
	if slotExists() {
		t.Fatal("the slot is still on the source after archive-status released it")
	}

	// delete takes the WAL archive with the artifacts.
	if r := e.agent(t, st, db, job, nil, "delete"); r.Code != 0 {
		t.Fatalf("delete: exit %d: %s", r.Code, r.Stderr)
	}
	if objs, err := st.Open.List(context.Background(), job.WALDir()); err != nil || len(objs) > 0 {
		t.Errorf("after delete, %d object(s) left in the WAL archive (%v)", len(objs), err)
	}
}

// PointInTimePostgresEncrypted: a physical base encrypted with age is
// stored as no tar and no zstd stream; a restore to latest with the
// identity recovers it and replays the archive after it; without the
// identity it fails before the target exists.
func PointInTimePostgresEncrypted(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "pitpgenc_" + kind
	job := naming.Job{Namespace: "shop", Name: "pitpgenc-" + kind}
	check(t, e.DB.Create(db))
	t.Cleanup(func() {
		for _, d := range []string{db, db + "_latest", db + "_none"} {
			e.DB.Drop(d)
		}
		e.DB.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+pitr.SlotName(job.String())+"'")
	})
	_, err := e.DB.SQL(db, "CREATE TABLE t (id int PRIMARY KEY, note text); INSERT INTO t VALUES (1, 'in the base')")
	check(t, err)
	arch := e.startArchiver(t, st, db, job, t.TempDir())
	t.Cleanup(func() { arch.halt(t) })
	pub, priv := keyPair(t)
	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true", contract.EnvEncryptionRecipients + "=" + pub}, "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	if !naming.PhysicalBase(key[strings.LastIndex(key, "/")+1:]) || !naming.Encrypted(key) {
		t.Fatalf("artifact %s: not an encrypted physical base", key)
	}
	stored := st.Read(t, key)
	if strings.Contains(string(stored), "backup_label") || strings.HasPrefix(string(stored), "\x28\xb5\x2f\xfd") {
		t.Fatal("the stored base is readable as a tar or a zstd stream")
	}
	entry, _ := st.Index(t, job).Find(key[strings.LastIndex(key, "/")+1:])
	_, err = e.DB.SQL(db, "INSERT INTO t VALUES (2, 'after the base')")
	check(t, err)
	after := time.Now()
	check(t, testenv.Poll(90*time.Second, 200*time.Millisecond, func() error {
		ix, err := pitr.LoadIndex(context.Background(), st.Open, job.WALDir())
		if err != nil {
			return err
		}
		if w := ix.WindowFrom(pitr.Base{File: entry.WALBase.File}); w.Latest.Before(after) {
			return fmt.Errorf("archived to %s, not past %s yet", w.Latest, after)
		}
		return nil
	}))
	r := e.agent(t, st, db+"_none", job, []string{"CAIRN_RECOVERY_TARGET=latest"}, "restore")
	mustFail(t, r, "identit")
	if _, err := e.DB.SQL(db+"_none", "SELECT 1"); err == nil {
		t.Error("a restore without the identity created its target")
	}
	mustSucceed(t, e.agent(t, st, db+"_latest", job, []string{"CAIRN_RECOVERY_TARGET=latest", contract.EnvEncryptionIdentity + "=" + priv}, "restore"))
	if got, err := e.DB.SQL(db+"_latest", "SELECT string_agg(id::text, ',' ORDER BY id) FROM t"); err != nil || got != "1,2" {
		t.Errorf("restored the encrypted base to latest: %q (%v), want 1,2", got, err)
	}
}
