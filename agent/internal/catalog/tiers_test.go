package catalog

import (
	"slices"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// simulate runs a backup at each instant (a clock, no sleeping), pruning
// after each one as the agent's backup does, and returns the survivors'
// start times, oldest first.
func simulate(t *testing.T, at []time.Time, p Policy, verified func(time.Time) bool) []time.Time {
	t.Helper()
	var live []Entry
	ver := map[string]bool{}
	for _, now := range at {
		e := entry(t, now)
		live = append(live, e)
		if verified != nil && verified(now) {
			ver[e.Name] = true
		}
		pruned := Pruned(Apply(live, ver, p, now))
		live = slices.DeleteFunc(live, func(x Entry) bool {
			return slices.ContainsFunc(pruned, func(y Entry) bool { return y.Name == x.Name })
		})
	}
	var out []time.Time
	for _, e := range live {
		out = append(out, e.Start)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// wall lists instants given as wall-clock times in loc ("2006-01-02 15:04").
func wall(t *testing.T, loc *time.Location, s ...string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, x := range s {
		v, err := time.ParseInLocation("2006-01-02 15:04", x, loc)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.UTC())
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

func equalTimes(t *testing.T, got, want []time.Time, loc *time.Location) {
	t.Helper()
	show := func(ts []time.Time) string {
		var s []string
		for _, x := range ts {
			s = append(s, x.In(loc).Format("2006-01-02 15:04 MST"))
		}
		return strings.Join(s, "\n  ")
	}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("survivors (%d):\n  %s\nwant (%d):\n  %s", len(got), show(got), len(want), show(want))
	}
}

// A year of nightly backups at 01:30 Asia/Shanghai (17:30 UTC the day
// before), pruned after each: exactly the last 7 days, the newest of each
// of the last 4 ISO weeks, the last day of each of the 12 months and the
// newest of the year survive — every period counted in Shanghai, so the
// backup of 1 February 01:30 (31 January in UTC) is February's, never
// January's.
func TestTiersYearInShanghai(t *testing.T) {
	sh := zone(t, "Asia/Shanghai")
	var at []time.Time
	for d := time.Date(2026, 1, 1, 1, 30, 0, 0, sh); d.Year() == 2026; d = d.AddDate(0, 0, 1) {
		at = append(at, d.UTC())
	}
	if len(at) != 365 {
		t.Fatalf("simulated %d backups", len(at))
	}
	p := Policy{Retention: contract.Retention{KeepDaily: 7, KeepWeekly: 4, KeepMonthly: 12, KeepYearly: 3}, Location: sh}
	got := simulate(t, at, p, nil)
	want := wall(t, sh,
		// the last day of each month (monthly; December's is also daily)
		"2026-01-31 01:30", "2026-02-28 01:30", "2026-03-31 01:30", "2026-04-30 01:30", "2026-05-31 01:30", "2026-06-30 01:30",
		"2026-07-31 01:30", "2026-08-31 01:30", "2026-09-30 01:30", "2026-10-31 01:30", "2026-11-30 01:30",
		// the Sundays ending the ISO weeks before the last one (weekly)
		"2026-12-13 01:30", "2026-12-20 01:30",
		// the last 7 days (daily; 27 December is also a week's, 31 December the year's)
		"2026-12-25 01:30", "2026-12-26 01:30", "2026-12-27 01:30", "2026-12-28 01:30", "2026-12-29 01:30", "2026-12-30 01:30", "2026-12-31 01:30")
	equalTimes(t, got, want, sh)

	// The same backups evaluated in UTC keep other ones: the zone matters.
	p.Location = time.UTC
	if utc := simulate(t, at, p, nil); slices.EqualFunc(utc, want, time.Time.Equal) {
		t.Fatal("evaluating in UTC keeps the same backups: the test cannot tell the zones apart")
	}

	// Reasons: the newest is kept as newest, daily and every tier it heads.
	ds := Apply(entriesAt(t, got), nil, Policy{Retention: p.Retention, Location: sh}, at[len(at)-1])
	if r := ds[0].Reasons; !slices.Equal(r, []string{contract.KeepNewest, contract.KeepDaily, contract.KeepWeekly, contract.KeepMonthly, contract.KeepYearly}) {
		t.Errorf("newest kept for %v", r)
	}
	if r := ds[len(ds)-1].Reasons; !slices.Equal(r, []string{contract.KeepMonthly}) {
		t.Errorf("31 January kept for %v", r)
	}
}

func entriesAt(t *testing.T, ts []time.Time) []Entry {
	var out []Entry
	for _, x := range ts {
		out = append(out, entry(t, x))
	}
	return out
}

// Summer time ends in Berlin on 25 October 2026 (03:00 CEST becomes 02:00
// CET): the hour 02:00-03:00 happens twice, and each is an hour of its own.
// Backups every 30 minutes, keepHourly 8: the newest backup of each of the
// last 8 hours survives, both 02:30s among them.
func TestTiersHourlyAcrossSummerTimeEnd(t *testing.T) {
	be := zone(t, "Europe/Berlin")
	var at []time.Time
	for x := time.Date(2026, 10, 24, 20, 0, 0, 0, time.UTC); !x.After(time.Date(2026, 10, 25, 6, 0, 0, 0, time.UTC)); x = x.Add(30 * time.Minute) {
		at = append(at, x)
	}
	got := simulate(t, at, Policy{Retention: contract.Retention{KeepHourly: 8}, Location: be}, nil)
	want := []time.Time{}
	for _, s := range []string{"2026-10-24T23:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z",
		"2026-10-25T03:30:00Z", "2026-10-25T04:30:00Z", "2026-10-25T05:30:00Z", "2026-10-25T06:00:00Z"} {
		v, _ := time.Parse(time.RFC3339, s)
		want = append(want, v)
	}
	// 00:30Z is 02:30 CEST, 01:30Z is 02:30 CET.
	if a, b := want[1].In(be).Format("15:04 MST"), want[2].In(be).Format("15:04 MST"); a != "02:30 CEST" || b != "02:30 CET" {
		t.Fatalf("test data: %s, %s", a, b)
	}
	equalTimes(t, got, want, be)
}

// Summer time starts in Berlin on 29 March 2026 (02:00 CET becomes 03:00
// CEST): that day has 23 hours and is one day. Backups at 00:30 and 12:30
// Berlin time; the one at 00:30 on 1 April is 22:30 UTC on 31 March, and
// belongs to April. keepDaily 4 and keepMonthly 2: the 12:30 backups of
// the last four Berlin days survive (31 March's is March's newest).
func TestTiersDailyAndMonthAcrossSummerTimeStart(t *testing.T) {
	be := zone(t, "Europe/Berlin")
	var at []time.Time
	for d := time.Date(2026, 3, 27, 0, 0, 0, 0, be); d.Before(time.Date(2026, 4, 2, 0, 0, 0, 0, be)); d = d.AddDate(0, 0, 1) {
		for _, h := range []int{0, 12} {
			at = append(at, time.Date(d.Year(), d.Month(), d.Day(), h, 30, 0, 0, be).UTC())
		}
	}
	p := Policy{Retention: contract.Retention{KeepDaily: 4, KeepMonthly: 2}, Location: be}
	got := simulate(t, at, p, nil)
	want := wall(t, be, "2026-03-29 12:30", "2026-03-30 12:30", "2026-03-31 12:30", "2026-04-01 12:30")
	equalTimes(t, got, want, be)
	if want[0].Sub(at[4]) != 11*time.Hour {
		t.Fatalf("test data: 29 March 00:30 to 12:30 should be 11 hours, is %s", want[0].Sub(at[4]))
	}
	p.Location = time.UTC
	if utc := simulate(t, at, p, nil); slices.EqualFunc(utc, want, time.Time.Equal) {
		t.Fatal("evaluating in UTC keeps the same backups: the test cannot tell the zones apart")
	}
}

// minVerified: the newest verified backups are never pruned, whatever the
// tiers or the age say — through a month of backups whose verifications
// all fail, and through a streak of failed backups (no new artifact, the
// prune runs on with a later clock).
func TestMinVerifiedHoldsThroughFailures(t *testing.T) {
	var at []time.Time
	start := time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)
	for i := range 40 {
		at = append(at, start.AddDate(0, 0, i))
	}
	good := map[time.Time]bool{at[0]: true, at[4]: true} // verified: days 1 and 5; every later verification fails
	isGood := func(x time.Time) bool { return good[x] }

	tiers := Policy{Retention: contract.Retention{KeepDaily: 3, MinVerified: 2}}
	got := simulate(t, at, tiers, isGood)
	equalTimes(t, got, []time.Time{at[0], at[4], at[37], at[38], at[39]}, time.UTC)

	tiers.MinVerified = 1
	got = simulate(t, at, tiers, isGood)
	equalTimes(t, got, []time.Time{at[4], at[37], at[38], at[39]}, time.UTC)

	// The days form with minVerified, then 30 days of failed backups: each
	// later prune finds everything expired, and still keeps the newest and
	// the newest verified one.
	days := Policy{Days: 7, Retention: contract.Retention{MinVerified: 1}}
	live := entriesAt(t, at[:10])
	ver := map[string]bool{live[4].Name: true}
	for d := 1; d <= 30; d++ {
		now := at[9].AddDate(0, 0, d)
		pruned := Pruned(Apply(live, ver, days, now))
		live = slices.DeleteFunc(live, func(x Entry) bool {
			return slices.ContainsFunc(pruned, func(y Entry) bool { return y.Name == x.Name })
		})
	}
	var left []time.Time
	for _, e := range live {
		left = append(left, e.Start)
	}
	equalTimes(t, left, []time.Time{at[4], at[9]}, time.UTC)
	// Without minVerified only the newest is left (the old behaviour).
	if ds := Apply(live, ver, Policy{Days: 7}, at[9].AddDate(0, 0, 30)); len(Pruned(ds)) != 1 {
		t.Fatalf("without minVerified the verified one should go: %+v", ds)
	}
}

// The report lists kept artifacts newest first with their reasons, and the
// pruned; the contract shortens it to fit a termination message.
func TestReportFits(t *testing.T) {
	var es []Entry
	for i := range 200 {
		es = append(es, entry(t, t0.Add(time.Duration(i)*time.Hour)))
	}
	p := Policy{Retention: contract.Retention{KeepHourly: 150}, Location: time.UTC}
	r := Report(Apply(es, nil, p, t0), p, true)
	if len(r.Kept) != 150 || len(r.Pruned) != 50 || !r.DryRun || r.TimeZone != "UTC" {
		t.Fatalf("report: %d kept, %d pruned, %+v", len(r.Kept), len(r.Pruned), r)
	}
	b, err := contract.MarshalSummary(contract.Summary{Command: "prune", BackupJob: "shop/orders", Retention: r})
	if err != nil || len(b) > contract.MaxMessageBytes {
		t.Fatalf("summary of %d bytes: %v", len(b), err)
	}
	if !strings.Contains(string(b), `"truncated":`) || len(r.Kept) != 150 {
		t.Fatalf("the cut must be counted and must not change the report: %s", b)
	}
}
