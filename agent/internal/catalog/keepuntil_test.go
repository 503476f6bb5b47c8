package catalog

import (
	"testing"
	"time"

	"cairn.dev/agent/contract"
)

func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	return wall(t, loc, s)[0]
}

// KeepUntil, case by case: the start of the N-th period after the
// artifact's own, in the policy's zone, once its period has ended.
func TestKeepUntil(t *testing.T) {
	sh, berlin := zone(t, "Asia/Shanghai"), zone(t, "Europe/Berlin")
	for _, c := range []struct {
		name    string
		loc     *time.Location
		r       contract.Retention
		reasons []string
		start   string
		now     string
		want    string // "" : zero
	}{
		{"month ended in Shanghai, not yet in UTC", sh, contract.Retention{KeepMonthly: 12}, []string{contract.KeepMonthly},
			"2026-01-31 01:30", "2026-02-01 01:30", "2027-01-01 00:00"},
		{"month still open", sh, contract.Retention{KeepMonthly: 12}, []string{contract.KeepMonthly},
			"2026-01-31 01:30", "2026-01-31 23:59", ""},
		{"day across summer time's start (a 23-hour day)", berlin, contract.Retention{KeepDaily: 7}, []string{contract.KeepDaily},
			"2026-03-28 23:30", "2026-03-29 00:10", "2026-04-04 00:00"},
		{"ISO week: Sunday's backup, kept 4 weeks from its Monday", berlin, contract.Retention{KeepWeekly: 4}, []string{contract.KeepWeekly},
			"2026-03-01 22:00", "2026-03-02 00:00", "2026-03-23 00:00"},
		{"year", sh, contract.Retention{KeepYearly: 7}, []string{contract.KeepYearly},
			"2026-12-31 01:30", "2027-01-01 01:30", "2033-01-01 00:00"},
		{"the longest tier wins", sh, contract.Retention{KeepDaily: 7, KeepMonthly: 12}, []string{contract.KeepDaily, contract.KeepMonthly},
			"2026-01-31 01:30", "2026-02-01 01:30", "2027-01-01 00:00"},
		{"a tier that does not keep it counts not", sh, contract.Retention{KeepDaily: 7, KeepMonthly: 12}, []string{contract.KeepDaily},
			"2026-01-31 01:30", "2026-02-01 01:30", "2026-02-07 00:00"},
		{"keepLast, newest, verified: no date", sh, contract.Retention{KeepLast: 3, MinVerified: 1},
			[]string{contract.KeepNewest, contract.KeepLastReason, contract.KeepVerified}, "2026-01-31 01:30", "2027-01-01 01:30", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decision{Entry: entry(t, at(t, c.loc, c.start)), Reasons: c.reasons}
			got := KeepUntil(d, Policy{Retention: c.r, Location: c.loc}, at(t, c.loc, c.now))
			if c.want == "" {
				if !got.IsZero() {
					t.Fatalf("got %s, want none", got.In(c.loc))
				}
				return
			}
			if want := at(t, c.loc, c.want); !got.Equal(want) {
				t.Fatalf("got %s, want %s", got.In(c.loc), want.In(c.loc))
			}
		})
	}
	// The hour repeated when summer time ends is an hour of its own: the
	// first 02:30 (CEST, 00:30 UTC) is kept 2 hours from 00:00 UTC.
	first := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)
	d := Decision{Entry: entry(t, first), Reasons: []string{contract.KeepHourly}}
	if got := KeepUntil(d, Policy{Retention: contract.Retention{KeepHourly: 2}, Location: berlin}, first.Add(time.Hour)); !got.Equal(time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("repeated hour: got %s", got)
	}
	// The simple form has no tiers.
	if got := KeepUntil(d, Policy{Days: 7}, first.AddDate(0, 0, 1)); !got.IsZero() {
		t.Fatalf("retentionDays: got %s", got)
	}
}

// The lock never outlives what the policy keeps: over a simulated year of
// backups (nightly in Shanghai; every 40 minutes in Berlin across both
// summer-time changes), pruned after each as the agent does, an artifact
// is never pruned before the latest KeepUntil any prune computed for it —
// so extending its lock to that date never makes prune meet a lock the
// policy does not want. And the monthlies are locked for (almost) their
// whole keep time, not just the lock days.
func TestKeepUntilNeverOutlivesThePolicy(t *testing.T) {
	sh, berlin := zone(t, "Asia/Shanghai"), zone(t, "Europe/Berlin")
	var nightly []time.Time
	for d := time.Date(2026, 1, 1, 1, 30, 0, 0, sh); d.Year() < 2028; d = d.AddDate(0, 0, 1) {
		nightly = append(nightly, d.UTC())
	}
	var frequent []time.Time
	for d := time.Date(2026, 3, 20, 0, 0, 0, 0, berlin); d.Before(time.Date(2026, 11, 5, 0, 0, 0, 0, berlin)); d = d.Add(40 * time.Minute) {
		frequent = append(frequent, d.UTC())
	}
	for _, c := range []struct {
		name string
		at   []time.Time
		p    Policy
	}{
		{"nightly in Shanghai", nightly, Policy{Retention: contract.Retention{KeepDaily: 7, KeepWeekly: 4, KeepMonthly: 12, KeepYearly: 3}, Location: sh}},
		{"every 40 minutes in Berlin", frequent, Policy{Retention: contract.Retention{KeepHourly: 30, KeepDaily: 10, KeepWeekly: 3, KeepMonthly: 2}, Location: berlin}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var live []Entry
			locked := map[string]time.Time{}
			maxLock := time.Duration(0)
			for _, now := range c.at {
				live = append(live, entry(t, now))
				ds := Apply(live, nil, c.p, now)
				for _, d := range ds {
					if u := KeepUntil(d, c.p, now); u.After(locked[d.Entry.Name]) {
						if len(d.Reasons) == 0 {
							t.Fatalf("%s: a pruned artifact gets a lock", d.Entry.Name)
						}
						locked[d.Entry.Name] = u
						maxLock = max(maxLock, u.Sub(d.Entry.Start))
					}
				}
				for _, e := range Pruned(ds) {
					if u := locked[e.Name]; now.Before(u) {
						t.Fatalf("%s pruned at %s, locked until %s", e.Name, now.In(c.p.Location), u.In(c.p.Location))
					}
				}
				pruned := Pruned(ds)
				var next []Entry
				for _, e := range live {
					if !containsName(pruned, e.Name) {
						next = append(next, e)
					}
				}
				live = next
			}
			if c.p.KeepMonthly > 0 && maxLock < time.Duration(c.p.KeepMonthly-1)*28*24*time.Hour {
				t.Fatalf("the longest lock is %s: the monthlies are not locked for their keep time", maxLock)
			}
		})
	}
}

func containsName(es []Entry, name string) bool {
	for _, e := range es {
		if e.Name == name {
			return true
		}
	}
	return false
}
