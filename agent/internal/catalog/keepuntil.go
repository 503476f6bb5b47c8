package catalog

import (
	"slices"
	"time"

	"cairn.dev/agent/contract"
)

// calendar is one tier's periods: the start of the period t (in the
// policy's zone) belongs to, and the start of the k-th period after it.
type calendar struct {
	reason string
	n      int
	start  func(t time.Time) time.Time
	after  func(start time.Time, k int) time.Time
}

func hourStart(t time.Time) time.Time {
	// Minus the minutes and seconds of the local time: right in zones
	// whose offset is not whole hours, and each of a repeated hour (summer
	// time's end) has its own start, as hourOf counts them.
	return t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
}

func dayStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

func weekStart(t time.Time) time.Time {
	d := dayStart(t)
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7)) // back to Monday
}

func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
}

func yearStart(t time.Time) time.Time {
	return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, t.Location())
}

// addDays adds k calendar days at local midnight (a 23- or 25-hour day is
// one day).
func addDays(s time.Time, k int) time.Time {
	return time.Date(s.Year(), s.Month(), s.Day()+k, 0, 0, 0, 0, s.Location())
}

func (p Policy) calendars() []calendar {
	return []calendar{
		{contract.KeepHourly, p.KeepHourly, hourStart, func(s time.Time, k int) time.Time { return s.Add(time.Duration(k) * time.Hour) }},
		{contract.KeepDaily, p.KeepDaily, dayStart, addDays},
		{contract.KeepWeekly, p.KeepWeekly, weekStart, func(s time.Time, k int) time.Time { return addDays(s, 7*k) }},
		{contract.KeepMonthly, p.KeepMonthly, monthStart, func(s time.Time, k int) time.Time {
			return time.Date(s.Year(), s.Month()+time.Month(k), 1, 0, 0, 0, 0, s.Location())
		}},
		{contract.KeepYearly, p.KeepYearly, yearStart, func(s time.Time, k int) time.Time {
			return time.Date(s.Year()+k, 1, 1, 0, 0, 0, 0, s.Location())
		}},
	}
}

// KeepUntil is how long the calendar tiers that keep d will keep it at
// least: for each of d's tier reasons whose period has ended at now (so d
// stays that period's newest backup: no later backup can fall into it),
// the start of the N-th period after d's own — the first moment N newer
// periods can hold a backup and the tier can drop d. The latest of those;
// zero when no tier of an ended period keeps d (the simple form, keepLast,
// newest, verified: their end is not a date).
func KeepUntil(d Decision, p Policy, now time.Time) time.Time {
	if p.Days > 0 {
		return time.Time{}
	}
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	t := d.Entry.Start.In(loc)
	var until time.Time
	for _, c := range p.calendars() {
		if c.n < 1 || !slices.Contains(d.Reasons, c.reason) {
			continue
		}
		s := c.start(t)
		if now.Before(c.after(s, 1)) {
			continue // its period is still open: a later backup may replace it
		}
		if u := c.after(s, c.n); u.After(until) {
			until = u
		}
	}
	return until
}
