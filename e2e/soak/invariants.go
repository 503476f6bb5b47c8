package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Invariant is one checked property of a soak's history.
type Invariant struct {
	Name string
	OK   bool
	// Summary says what was checked, in figures.
	Summary string
	// Details are the problems (when !OK) or notes worth reading.
	Details []string
}

func (i Invariant) String() string {
	mark := "PASS"
	if !i.OK {
		mark = "FAIL"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s: %s", mark, i.Name, i.Summary)
	for _, d := range i.Details {
		fmt.Fprintf(&b, "\n        %s", d)
	}
	return b.String()
}

// Check runs every invariant over h.
func Check(h *History) []Invariant {
	return []Invariant{
		ScheduledRunsNotLost(h),
		RunsReportedOnce(h),
		NoDuplicateJobs(h),
		BackupsInCatalogAndStore(h),
		RestoresEqualSource(h),
		NothingStuckTerminating(h),
		MigrationLeavesNothing(h),
		OperatorMemoryFlat(h),
	}
}

// lateAfter: a scheduled run whose Job came later than this after its
// minute is counted as late (it still ran: the CronJob controller starts a
// missed run within the CronJob's starting deadline).
const lateAfter = 10 * time.Second

// ScheduledRunsNotLost: every minute of each BackupJob's window has its
// scheduled run (a Job with that scheduled time), unless a scheduled run of
// the same BackupJob was still running then (concurrencyPolicy Forbid:
// the minute is skipped, by design).
func ScheduledRunsNotLost(h *History) Invariant {
	inv := Invariant{Name: "scheduled runs: none lost"}
	var due, ran, late, skipped int
	var lost []string
	for _, w := range h.Windows {
		runs := h.backupRuns(w.BackupJob)
		for _, m := range w.Minutes() {
			due++
			found := false
			for _, r := range runs {
				if r.RunKind == "scheduled" && r.Scheduled.Equal(m) {
					found = true
					if r.Created.Sub(m) > lateAfter {
						late++
					}
					break
				}
			}
			if found {
				ran++
				continue
			}
			blocked := false
			for _, r := range runs {
				// The CronJob controller looks a moment after the minute.
				if r.RunKind == "scheduled" && r.Created.Before(m.Add(5*time.Second)) &&
					(r.Finished.IsZero() || r.Finished.After(m.Add(-time.Second))) {
					blocked = true
					break
				}
			}
			if blocked {
				skipped++
				continue
			}
			lost = append(lost, fmt.Sprintf("%s: no run for %s and none running then", w.BackupJob, clock(m)))
		}
	}
	inv.OK = len(lost) == 0 && due > 0
	inv.Summary = fmt.Sprintf("%d minute(s) due over %d BackupJob(s): %d ran (%d more than %s late), %d skipped while the previous run still ran, %d lost",
		due, len(h.Windows), ran, late, lateAfter, skipped, len(lost))
	if due == 0 {
		inv.Details = append(inv.Details, "no scheduled minute was due: nothing was checked")
	}
	inv.Details = append(inv.Details, lost...)
	return inv
}

// Report reasons of the backup operator: one Event per recorded run.
const (
	ReasonBackupSucceeded = "BackupSucceeded"
	ReasonBackupFailed    = "BackupFailed"
)

// RunsReportedOnce: every backup run finished (none left running), and the
// BackupJob reported each exactly once — one BackupSucceeded or
// BackupFailed Event naming the run's Job, matching how it ended.
func RunsReportedOnce(h *History) Invariant {
	inv := Invariant{Name: "backup runs: each finished and reported once"}
	reports := runReports(h.Events)
	var runs, succeeded, failed, retried int
	var problems []string
	for _, j := range h.Jobs {
		if !j.reportable() {
			continue
		}
		runs++
		if j.FailedPods > 0 {
			retried++
		}
		if j.Finished.IsZero() {
			how := "never finished"
			if j.Vanished {
				how = "was deleted before it finished"
			}
			problems = append(problems, fmt.Sprintf("%s: Job %s (created %s) %s", j.Owner, j.Name, clock(j.Created), how))
			continue
		}
		want := ReasonBackupFailed
		if j.Succeeded {
			want = ReasonBackupSucceeded
			succeeded++
		} else {
			failed++
		}
		n, wrong := 0, []string{}
		for _, e := range reports[j.Owner+"/"+j.Name] {
			n += max(e.Count, 1)
			if e.Reason != want {
				wrong = append(wrong, e.Reason)
			}
		}
		switch {
		case n == 0:
			problems = append(problems, fmt.Sprintf("%s: Job %s (%s at %s) was never reported", j.Owner, j.Name, outcome(j), clock(j.Finished)))
		case n > 1:
			problems = append(problems, fmt.Sprintf("%s: Job %s reported %d times", j.Owner, j.Name, n))
		case len(wrong) > 0:
			problems = append(problems, fmt.Sprintf("%s: Job %s %s but reported %s", j.Owner, j.Name, outcome(j), strings.Join(wrong, ", ")))
		}
	}
	inv.OK = len(problems) == 0 && runs > 0
	inv.Summary = fmt.Sprintf("%d run(s): %d succeeded, %d failed (reported failed), %d retried a pod; %d problem(s)", runs, succeeded, failed, retried, len(problems))
	inv.Details = problems
	return inv
}

// runReports groups the backup operator's report Events by owner/job.
func runReports(events []EventRecord) map[string][]EventRecord {
	reports := map[string][]EventRecord{}
	for _, e := range events {
		if e.Reason == ReasonBackupSucceeded || e.Reason == ReasonBackupFailed {
			reports[e.Regarding+"/"+e.Related] = append(reports[e.Regarding+"/"+e.Related], e)
		}
	}
	return reports
}

// reportable: a backup run the operator must report once it finished.
func (j JobRecord) reportable() bool {
	return j.Kind == KindBackup && (j.RunKind == "scheduled" || j.RunKind == "run-now")
}

func outcome(j JobRecord) string {
	if j.Succeeded {
		return "succeeded"
	}
	return "failed"
}

// NoDuplicateJobs: no Job name was created twice (a second UID), no
// scheduled minute of a BackupJob has two Jobs, and no RestoreJob ran
// two Jobs.
func NoDuplicateJobs(h *History) Invariant {
	inv := Invariant{Name: "no duplicate Jobs"}
	byName := map[string]map[string]bool{}
	byMinute := map[string]map[string]bool{}
	byRestore := map[string]map[string]bool{}
	add := func(m map[string]map[string]bool, k, uid string) {
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][uid] = true
	}
	for _, j := range h.Jobs {
		add(byName, j.Name, j.UID)
		if j.Kind == KindBackup && j.RunKind == "scheduled" && !j.Scheduled.IsZero() {
			add(byMinute, j.Owner+" at "+clock(j.Scheduled), j.UID)
		}
		if j.Kind == KindRestore {
			add(byRestore, j.Owner, j.UID)
		}
	}
	var problems []string
	for _, set := range []struct {
		what string
		m    map[string]map[string]bool
	}{{"Job name", byName}, {"scheduled run of", byMinute}, {"RestoreJob", byRestore}} {
		var keys []string
		for k, uids := range set.m {
			if len(uids) > 1 {
				keys = append(keys, fmt.Sprintf("%s %s: %d Jobs", set.what, k, len(uids)))
			}
		}
		sort.Strings(keys)
		problems = append(problems, keys...)
	}
	inv.OK = len(problems) == 0 && len(h.Jobs) > 0
	inv.Summary = fmt.Sprintf("%d Job(s): %d scheduled backup minute(s), %d RestoreJob(s) with Jobs; %d duplicate(s)",
		len(h.Jobs), len(byMinute), len(byRestore), len(problems))
	inv.Details = problems
	return inv
}

// BackupsInCatalogAndStore: every succeeded backup's artifact is listed in
// its BackupJob's catalog (its manifest) with the checksum the run
// reported, and the store holds it with that size and SHA-256; and every
// manifest of the catalog names an object that is there with its checksum.
func BackupsInCatalogAndStore(h *History) Invariant {
	inv := Invariant{Name: "succeeded backups: in their catalog and in the store with their checksum"}
	manifests := map[string]Manifest{}
	for _, m := range h.Store.Manifests {
		manifests[m.Artifact] = m
	}
	notes := map[string]string{} // job → note of its BackupSucceeded Event
	for _, e := range h.Events {
		if e.Reason == ReasonBackupSucceeded {
			notes[e.Regarding+"/"+e.Related] = e.Note
		}
	}
	var problems []string
	backups := 0
	for _, j := range h.Jobs {
		if j.Kind != KindBackup || !j.Succeeded || (j.RunKind != "scheduled" && j.RunKind != "run-now") {
			continue
		}
		backups++
		path, checksum := "", ""
		if j.Result != nil {
			path, checksum = j.Result.Artifact, j.Result.Checksum
		} else if _, after, ok := strings.Cut(notes[j.Owner+"/"+j.Name], " succeeded: "); ok {
			path = strings.TrimSpace(after)
		}
		if path == "" {
			problems = append(problems, fmt.Sprintf("%s: Job %s succeeded with no artifact known (no agent result, no Event naming it)", j.Owner, j.Name))
			continue
		}
		m, ok := manifests[path]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: %s (Job %s) is not in the catalog", j.Owner, path, j.Name))
		case checksum != "" && m.Checksum != checksum:
			problems = append(problems, fmt.Sprintf("%s: %s: the catalog says %s, the run reported %s", j.Owner, path, m.Checksum, checksum))
		}
		if _, ok := h.Store.Objects[path]; !ok {
			problems = append(problems, fmt.Sprintf("%s: %s (Job %s) is not in the store", j.Owner, path, j.Name))
		}
	}
	for _, m := range h.Store.Manifests {
		o, ok := h.Store.Objects[m.Artifact]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("catalog entry %s: its artifact %s is not in the store", m.Key, m.Artifact))
		case o.SHA256 != m.Checksum || o.Size != m.Size:
			problems = append(problems, fmt.Sprintf("%s: stored %d bytes %s, the catalog says %d bytes %s", m.Artifact, o.Size, o.SHA256, m.Size, m.Checksum))
		}
	}
	inv.OK = len(problems) == 0 && backups > 0
	inv.Summary = fmt.Sprintf("%d succeeded backup(s); %d catalog entr(ies), each object read back and hashed; %d problem(s)",
		backups, len(h.Store.Manifests), len(problems))
	inv.Details = problems
	return inv
}

// RestoresEqualSource: every RestoreJob ended (Succeeded or Failed: a
// failure is reported, e.g. the store down for its retries); each of the
// soak's own that succeeded restored tables equal to the source's, table
// by table (rows and content checksum).
func RestoresEqualSource(h *History) Invariant {
	inv := Invariant{Name: "restores: ended, and each succeeded restore's tables equal their source"}
	var own, verifications, equal, failed int
	var problems, notes []string
	for _, r := range h.Restores {
		if r.Verification {
			verifications++
		} else {
			own++
		}
		switch r.Phase {
		case "Succeeded":
			if r.Verification {
				continue
			}
			switch {
			case !r.Compared:
				problems = append(problems, fmt.Sprintf("%s (%s): succeeded but its target was not compared", r.Name, r.Engine))
			case len(r.Differences) > 0:
				problems = append(problems, fmt.Sprintf("%s (%s, %s): differs from the source: %s", r.Name, r.Engine, r.Artifact, strings.Join(r.Differences, "; ")))
			default:
				equal++
			}
		case "Failed":
			failed++
			notes = append(notes, fmt.Sprintf("%s failed (reported): %s", r.Name, r.Message))
		default:
			problems = append(problems, fmt.Sprintf("%s: still %q at the end", r.Name, r.Phase))
		}
	}
	inv.OK = len(problems) == 0 && equal > 0
	inv.Summary = fmt.Sprintf("%d RestoreJob(s) of the soak and %d verification(s) of the plan: %d restored equal to the source, %d failed (reported); %d problem(s)",
		own, verifications, equal, failed, len(problems))
	inv.Details = append(problems, notes...)
	return inv
}

// NothingStuckTerminating: every object the soak deleted at the end is
// gone within the deadline.
func NothingStuckTerminating(h *History) Invariant {
	inv := Invariant{Name: "nothing stuck Terminating"}
	for _, t := range h.Terminating {
		inv.Details = append(inv.Details, fmt.Sprintf("%s %s/%s: Terminating since %s", t.Kind, t.Namespace, t.Name, clock(t.Since)))
	}
	inv.OK = len(h.Terminating) == 0
	inv.Summary = fmt.Sprintf("%d object(s) left Terminating", len(h.Terminating))
	return inv
}

// MigrationLeavesNothing: the Continuous MigrationJob cut over (Succeeded),
// its target equals the source, and once it is deleted no replication slot,
// publication or subscription of it is left on the servers.
func MigrationLeavesNothing(h *History) Invariant {
	inv := Invariant{Name: "continuous migration: cut over equal, no slot left after deletion"}
	m := h.Migration
	if m == nil {
		inv.Summary = "no MigrationJob was recorded"
		return inv
	}
	var problems []string
	if m.Phase != "Succeeded" {
		problems = append(problems, fmt.Sprintf("%s ended %q, not Succeeded", m.Name, m.Phase))
	}
	if !m.Compared {
		problems = append(problems, "target and source were not compared")
	}
	for _, d := range m.Differences {
		problems = append(problems, "differs: "+d)
	}
	if !m.Deleted {
		problems = append(problems, m.Name+" is not gone after its deletion")
	}
	for _, l := range m.Left {
		problems = append(problems, "left on the server: "+l)
	}
	inv.OK = len(problems) == 0
	inv.Summary = fmt.Sprintf("%s %s; target %s the source; %d replication object(s) left after deletion; load: %s",
		m.Name, m.Phase, map[bool]string{true: "equals", false: "does not equal"}[m.Compared && len(m.Differences) == 0], len(m.Left), m.Load)
	inv.Details = problems
	return inv
}

// OperatorMemoryFlat: each operator's largest resident set at the end is
// within RSSFactor × the largest at the start + RSSSlack, and no operator
// container was OOMKilled.
func OperatorMemoryFlat(h *History) Invariant {
	inv := Invariant{Name: "operators' memory: flat (RSS start vs end), never OOMKilled"}
	type span struct {
		first, last      time.Time
		start, end, top  int64
		startPod, endPod string
	}
	spans := map[string]*span{}
	for _, s := range h.RSS {
		sp := spans[s.Operator]
		if sp == nil {
			sp = &span{first: s.At, last: s.At}
			spans[s.Operator] = sp
		}
		if s.At.Before(sp.first) {
			sp.first, sp.start, sp.startPod = s.At, 0, ""
		}
		if s.At.After(sp.last) {
			sp.last, sp.end, sp.endPod = s.At, 0, ""
		}
		if s.At.Equal(sp.first) && s.Bytes > sp.start {
			sp.start, sp.startPod = s.Bytes, s.Pod
		}
		if s.At.Equal(sp.last) && s.Bytes > sp.end {
			sp.end, sp.endPod = s.Bytes, s.Pod
		}
		sp.top = max(sp.top, s.Bytes)
	}
	var names, parts, problems []string
	for n := range spans {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sp := spans[n]
		parts = append(parts, fmt.Sprintf("%s %s → %s (max %s)", n, mib(sp.start), mib(sp.end), mib(sp.top)))
		if limit := int64(float64(sp.start)*h.RSSFactor) + h.RSSSlack; sp.end > limit || sp.start == 0 {
			problems = append(problems, fmt.Sprintf("%s: %s at the end (%s) against %s at the start (%s): more than %.1f× + %s",
				n, mib(sp.end), sp.endPod, mib(sp.start), sp.startPod, h.RSSFactor, mib(h.RSSSlack)))
		}
	}
	var notes []string
	for _, e := range h.Exits {
		if e.Reason == "OOMKilled" {
			problems = append(problems, fmt.Sprintf("%s OOMKilled at %s", e.Pod, clock(e.At)))
		} else {
			notes = append(notes, fmt.Sprintf("%s exited by itself at %s: %s, exit code %d", e.Pod, clock(e.At), e.Reason, e.ExitCode))
		}
	}
	inv.OK = len(problems) == 0 && len(spans) > 0
	inv.Summary = "largest replica, first vs last sample: " + strings.Join(parts, ", ")
	if len(spans) == 0 {
		inv.Summary = "no RSS sample"
	}
	inv.Details = append(problems, notes...)
	return inv
}
