package soak

import (
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func minute(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

// good is a history every check passes: three minutes of one BackupJob,
// each run reported, in the catalog and the store; a restore equal to its
// source; the migration cut over and cleaned up; memory flat.
func good() *History {
	h := &History{RSSFactor: 1.5, RSSSlack: 16 << 20,
		Windows: []ScheduleWindow{{BackupJob: "pg", From: minute(0).Add(20 * time.Second), To: minute(3).Add(10 * time.Second)}},
		Store:   Store{Objects: map[string]StoreObject{}}}
	for i := 1; i <= 3; i++ {
		name := "pg-" + string(rune('a'+i))
		art := "soak/soak/pg/soak_pg_" + name + ".pgdump.zst"
		h.Jobs = append(h.Jobs, JobRecord{UID: "u" + name, Name: name, Kind: KindBackup, Owner: "pg", RunKind: "scheduled",
			Scheduled: minute(i), Created: minute(i).Add(time.Second), Finished: minute(i).Add(5 * time.Second), Succeeded: true,
			Result: &contract.Result{Artifact: art, Size: 10, Checksum: "sha256:" + name}})
		h.Events = append(h.Events, EventRecord{UID: "e" + name, Regarding: "pg", Related: name, Reason: ReasonBackupSucceeded,
			Note: "backup run " + name + " succeeded: " + art, Count: 1})
		h.Store.Objects[art] = StoreObject{Size: 10, SHA256: "sha256:" + name}
		h.Store.Manifests = append(h.Store.Manifests, Manifest{Key: "soak/soak/pg/entries/x.json", Artifact: art, Size: 10, Checksum: "sha256:" + name})
	}
	h.Jobs = append(h.Jobs, JobRecord{UID: "ur", Name: "soak-r-1", Kind: KindRestore, Owner: "soak-r-1", Created: minute(2), Finished: minute(2).Add(4 * time.Second), Succeeded: true})
	h.Restores = []RestoreRecord{{Name: "soak-r-1", Engine: "postgres", Phase: "Succeeded", Compared: true},
		{Name: "orders-verify-1", Verification: true, Phase: "Succeeded"}}
	h.Migration = &MigrationRecord{Name: "live", Phase: "Succeeded", Compared: true, Deleted: true}
	for _, at := range []time.Time{minute(0), minute(3)} {
		h.RSS = append(h.RSS, RSSSample{At: at, Operator: "backup", Pod: "b-1", Leader: true, Bytes: 40 << 20},
			RSSSample{At: at, Operator: "backup", Pod: "b-2", Bytes: 30 << 20})
	}
	return h
}

func find(invs []Invariant, name string) Invariant {
	for _, i := range invs {
		if i.Name == name {
			return i
		}
	}
	panic("no invariant " + name)
}

func TestGoodHistoryPasses(t *testing.T) {
	for _, inv := range Check(good()) {
		if !inv.OK {
			t.Errorf("%s", inv)
		}
	}
}

// Each bad history makes exactly the invariant it breaks fail.
func TestEachInvariantCanFail(t *testing.T) {
	cases := []struct {
		name      string
		invariant string
		breakIt   func(h *History)
		want      string
	}{
		{"a minute without a run", "scheduled runs: none lost", func(h *History) { h.Jobs = append(h.Jobs[:1], h.Jobs[2:]...) }, "no run for 10:02:00"},
		{"nothing due", "scheduled runs: none lost", func(h *History) { h.Windows = nil }, "nothing was checked"},
		{"a run never finished", "backup runs: each finished and reported once", func(h *History) { h.Jobs[0].Finished = time.Time{} }, "never finished"},
		{"a run deleted while it ran", "backup runs: each finished and reported once", func(h *History) {
			h.Jobs[1].Finished, h.Jobs[1].Vanished = time.Time{}, true
		}, "deleted before it finished"},
		{"a run not reported", "backup runs: each finished and reported once", func(h *History) { h.Events = h.Events[1:] }, "never reported"},
		{"a run reported twice", "backup runs: each finished and reported once", func(h *History) { h.Events[0].Count = 2 }, "reported 2 times"},
		{"a run reported twice by two replicas", "backup runs: each finished and reported once", func(h *History) {
			e := h.Events[1]
			e.UID = "other"
			h.Events = append(h.Events, e)
		}, "reported 2 times"},
		{"a failed run reported as succeeded", "backup runs: each finished and reported once", func(h *History) { h.Jobs[0].Succeeded = false }, "failed but reported BackupSucceeded"},
		{"a Job name created twice", "no duplicate Jobs", func(h *History) {
			j := h.Jobs[0]
			j.UID = "again"
			h.Jobs = append(h.Jobs, j)
		}, "Job name pg-b: 2 Jobs"},
		{"two Jobs for one minute", "no duplicate Jobs", func(h *History) {
			j := h.Jobs[0]
			j.UID, j.Name = "again", "pg-other"
			h.Jobs = append(h.Jobs, j)
			h.Events = append(h.Events, EventRecord{UID: "e-other", Regarding: "pg", Related: "pg-other", Reason: ReasonBackupSucceeded, Count: 1})
		}, "scheduled run of pg at 10:01:00: 2 Jobs"},
		{"a RestoreJob with two Jobs", "no duplicate Jobs", func(h *History) {
			h.Jobs = append(h.Jobs, JobRecord{UID: "ur2", Name: "soak-r-1-again", Kind: KindRestore, Owner: "soak-r-1"})
		}, "RestoreJob soak-r-1: 2 Jobs"},
		{"an artifact missing from the catalog", "succeeded backups: in their catalog and in the store with their checksum", func(h *History) {
			h.Store.Manifests = h.Store.Manifests[1:]
		}, "is not in the catalog"},
		{"an artifact missing from the store", "succeeded backups: in their catalog and in the store with their checksum", func(h *History) {
			delete(h.Store.Objects, h.Jobs[1].Result.Artifact)
		}, "is not in the store"},
		{"a stored object with another checksum", "succeeded backups: in their catalog and in the store with their checksum", func(h *History) {
			h.Store.Objects[h.Jobs[2].Result.Artifact] = StoreObject{Size: 10, SHA256: "sha256:flipped"}
		}, "stored 10 bytes sha256:flipped"},
		{"a catalog checksum not the run's", "succeeded backups: in their catalog and in the store with their checksum", func(h *History) {
			h.Jobs[0].Result.Checksum = "sha256:other"
		}, "the run reported sha256:other"},
		{"a succeeded backup with no artifact known", "succeeded backups: in their catalog and in the store with their checksum", func(h *History) {
			h.Jobs[0].Result = nil
			h.Events[0].Note = "backup run pg-b succeeded"
		}, "no artifact known"},
		{"a restore that differs", "restores: ended, and each succeeded restore's tables equal their source", func(h *History) {
			h.Restores[0].Differences = []string{"orders: 19999 rows, source 20000"}
		}, "differs from the source"},
		{"a restore not compared", "restores: ended, and each succeeded restore's tables equal their source", func(h *History) { h.Restores[0].Compared = false }, "not compared"},
		{"a restore stuck", "restores: ended, and each succeeded restore's tables equal their source", func(h *History) { h.Restores[1].Phase = "Running" }, `still "Running"`},
		{"an object stuck Terminating", "nothing stuck Terminating", func(h *History) {
			h.Terminating = []Terminating{{Kind: "BackupJob", Namespace: "soak", Name: "pg", Since: minute(3)}}
		}, "BackupJob soak/pg"},
		{"a slot left", "continuous migration: cut over equal, no slot left after deletion", func(h *History) {
			h.Migration.Left = []string{"slot cairn_live"}
		}, "slot cairn_live"},
		{"a migration that failed", "continuous migration: cut over equal, no slot left after deletion", func(h *History) { h.Migration.Phase = "Failed" }, `ended "Failed"`},
		{"no migration", "continuous migration: cut over equal, no slot left after deletion", func(h *History) { h.Migration = nil }, ""},
		{"memory grew", "operators' memory: flat (RSS start vs end), never OOMKilled", func(h *History) { h.RSS[3].Bytes = 200 << 20 }, "backup: 200.0 MiB at the end"},
		{"an OOMKilled operator", "operators' memory: flat (RSS start vs end), never OOMKilled", func(h *History) {
			h.Exits = []OperatorExit{{Pod: "b-1", Reason: "OOMKilled", ExitCode: 137, At: minute(2)}}
		}, "b-1 OOMKilled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := good()
			c.breakIt(h)
			invs := Check(h)
			inv := find(invs, c.invariant)
			if inv.OK {
				t.Fatalf("%s passed on a bad history:\n%s", c.invariant, inv)
			}
			if !strings.Contains(inv.String(), c.want) {
				t.Errorf("%s does not say %q:\n%s", c.invariant, c.want, inv)
			}
			for _, other := range invs {
				if other.Name != c.invariant && !other.OK {
					t.Errorf("another invariant failed too:\n%s", other)
				}
			}
		})
	}
}

// A minute skipped because the previous scheduled run still ran is not
// lost (concurrencyPolicy Forbid).
func TestMinuteSkippedWhileRunningIsNotLost(t *testing.T) {
	h := good()
	h.Jobs[0].Finished = minute(2).Add(30 * time.Second) // the 10:01 run still runs at 10:02
	h.Jobs = append(h.Jobs[:1], h.Jobs[2:]...)           // and there is no 10:02 run
	inv := ScheduledRunsNotLost(h)
	if !inv.OK || !strings.Contains(inv.Summary, "1 skipped") {
		t.Fatalf("%s", inv)
	}
}
