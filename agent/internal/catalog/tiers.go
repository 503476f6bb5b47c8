package catalog

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"cairn.dev/agent/contract"
)

// Policy is a retention policy: calendar tiers (contract.Retention)
// evaluated in Location, or the simple form, Days.
type Policy struct {
	contract.Retention
	// Days, when set instead of tiers: keep what is younger than this
	// many days (from now, by start time).
	Days int
	// Location the tiers' periods are counted in.
	Location *time.Location
}

// Decision is what a policy decided for one artifact.
type Decision struct {
	Entry Entry
	// Reasons it is kept (contract.Keep…); none: it is pruned.
	Reasons []string
	// LockedUntil is the S3 Object Lock retain-until date of the artifact
	// when the prune read it (zero: not read, or not locked).
	LockedUntil time.Time
}

// tier is one calendar tier: how many periods, and the key of the period
// an instant (in the policy's zone) belongs to.
type tier struct {
	reason string
	n      int
	period func(t time.Time) string
}

// Periods, in the local time of the policy's zone. An hour carries its UTC
// offset: the hour repeated when summer time ends is two hours, each with
// its own newest backup; a 23- or 25-hour day is one day. Weeks are ISO
// weeks (Monday to Sunday).
func hourOf(t time.Time) string  { return t.Format("2006-01-02T15 -0700") }
func dayOf(t time.Time) string   { return t.Format("2006-01-02") }
func monthOf(t time.Time) string { return t.Format("2006-01") }
func yearOf(t time.Time) string  { return t.Format("2006") }
func weekOf(t time.Time) string {
	y, w := t.ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}

// Apply decides, for entries (any order), which to keep and why at now:
// the newest always; with tiers, the newest of each of a tier's N most
// recent periods that hold a backup, the N newest (keepLast) and the
// minVerified newest verified ones (verified: artifact names); with Days,
// those started within Days of now and the minVerified newest verified.
// The result is newest first.
func Apply(entries []Entry, verified map[string]bool, p Policy, now time.Time) []Decision {
	out := make([]Decision, len(entries))
	for i, e := range entries {
		out[i].Entry = e
	}
	slices.SortStableFunc(out, func(a, b Decision) int {
		if c := b.Entry.Start.Compare(a.Entry.Start); c != 0 {
			return c
		}
		return strings.Compare(b.Entry.Name, a.Entry.Name)
	})
	if len(out) == 0 {
		return out
	}
	keep := func(i int, reason string) {
		if !slices.Contains(out[i].Reasons, reason) {
			out[i].Reasons = append(out[i].Reasons, reason)
		}
	}
	keep(0, contract.KeepNewest)
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	if p.Days > 0 {
		cutoff := now.Add(-time.Duration(p.Days) * 24 * time.Hour)
		for i, d := range out {
			if !d.Entry.Start.Before(cutoff) {
				keep(i, contract.KeepWithinDays)
			}
		}
	}
	for i := range min(p.KeepLast, len(out)) {
		keep(i, contract.KeepLastReason)
	}
	for _, t := range []tier{
		{contract.KeepHourly, p.KeepHourly, hourOf},
		{contract.KeepDaily, p.KeepDaily, dayOf},
		{contract.KeepWeekly, p.KeepWeekly, weekOf},
		{contract.KeepMonthly, p.KeepMonthly, monthOf},
		{contract.KeepYearly, p.KeepYearly, yearOf},
	} {
		last, count := "", 0
		for i := 0; i < len(out) && count < t.n; i++ {
			// Newest first: the first entry of each period is its newest.
			if k := t.period(out[i].Entry.Start.In(loc)); k != last {
				last = k
				keep(i, t.reason)
				count++
			}
		}
	}
	count := 0
	for i := 0; i < len(out) && count < p.MinVerified; i++ {
		if verified[out[i].Entry.Name] {
			keep(i, contract.KeepVerified)
			count++
		}
	}
	return out
}

// Report is the retention report of decisions: kept artifacts with their
// reasons, newest first, and the pruned ones.
func Report(ds []Decision, p Policy, dryRun bool) *contract.RetentionReport {
	r := &contract.RetentionReport{DryRun: dryRun}
	if p.Days == 0 && p.Location != nil {
		r.TimeZone = p.Location.String()
	}
	for _, d := range ds {
		if len(d.Reasons) > 0 {
			k := contract.KeptArtifact{Artifact: d.Entry.Name, Reasons: d.Reasons}
			if !d.LockedUntil.IsZero() {
				u := d.LockedUntil.UTC()
				k.LockedUntil = &u
			}
			r.Kept = append(r.Kept, k)
		} else {
			r.Pruned = append(r.Pruned, d.Entry.Name)
		}
	}
	return r
}

// Pruned returns the entries ds does not keep, oldest first.
func Pruned(ds []Decision) []Entry {
	var out []Entry
	for i := len(ds) - 1; i >= 0; i-- {
		if len(ds[i].Reasons) == 0 {
			out = append(out, ds[i].Entry)
		}
	}
	return out
}
