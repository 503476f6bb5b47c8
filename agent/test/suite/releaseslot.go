package suite

import (
	"encoding/json"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pitr"
)

// ReleaseSlotWithoutStore (PostgreSQL): `agent archive-status` asked to
// release the archiver's slot (CAIRN_ARCHIVE_RELEASE_SLOT) with no store
// configured at all — as the backup operator runs it in its own namespace
// when the BackupJob's namespace is being deleted — drops the BackupJob's
// slot, whatever it retains, and no other; run again, it finds none and
// still succeeds. Without the release, archive-status still needs a store.
func ReleaseSlotWithoutStore(t *testing.T, e *Env) {
	job := naming.Job{Namespace: "gone", Name: "release-nostore"}
	other := naming.Job{Namespace: "gone", Name: "release-other"}
	slot, otherSlot := pitr.SlotName(job.String()), pitr.SlotName(other.String())
	drop := func() {
		e.DB.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('"+slot+"', '"+otherSlot+"')")
	}
	drop()
	t.Cleanup(drop)
	count := func(name string) string {
		t.Helper()
		out, err := e.DB.SQL("postgres", "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+name+"'")
		check(t, err)
		return out
	}
	// Slots reserving WAL from now, as the archiver's.
	for _, s := range []string{slot, otherSlot} {
		_, err := e.DB.SQL("postgres", "SELECT pg_create_physical_replication_slot('"+s+"', true)")
		check(t, err)
	}
	env := append(append([]string{}, e.DB.AgentEnv("postgres")...), "CAIRN_BACKUPJOB="+job.String())
	run := func(extra ...string) (int, *contract.ArchiveStatus, string) {
		t.Helper()
		r := e.Agent.Run(append(append([]string{}, env...), extra...), contract.CommandArchiveStatus)
		t.Logf("agent archive-status %v: exit %d\nstdout: %s\nstderr: %s", extra, r.Code, r.Stdout, r.Stderr)
		if r.Code != 0 {
			return r.Code, nil, r.TermLog
		}
		var rep contract.ArchiveStatus
		check(t, json.Unmarshal([]byte(r.TermLog), &rep))
		return 0, &rep, r.TermLog
	}

	if code, _, msg := run(); code != contract.ExitUsage {
		t.Errorf("archive-status (a check) without a store: exit %d (%s), want %d", code, msg, contract.ExitUsage)
	}
	if count(slot) != "1" {
		t.Fatal("a refused check touched the slot")
	}
	code, rep, msg := run(contract.EnvArchiveReleaseSlot + "=true")
	if code != 0 {
		t.Fatalf("releasing the slot without a store: exit %d: %s", code, msg)
	}
	if !rep.SlotReleased || rep.SlotDropped || rep.Slot != slot || rep.Dir != "" || rep.Segments != 0 {
		t.Errorf("release report %+v: want slot %s released (not dropped for its size) and no archive read", rep, slot)
	}
	if count(slot) != "0" {
		t.Fatalf("slot %s still on the source after the release", slot)
	}
	if count(otherSlot) != "1" {
		t.Fatalf("the release dropped slot %s of another BackupJob", otherSlot)
	}
	// Again: nothing to drop, still a success (a retried release Job).
	code, rep, msg = run(contract.EnvArchiveReleaseSlot + "=true")
	if code != 0 || rep.SlotExists || rep.SlotReleased {
		t.Errorf("a second release: exit %d (%s), report %+v; want success with no slot", code, msg, rep)
	}
}
