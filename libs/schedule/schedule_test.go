package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		spec, tz, want string
	}{
		{"", "", "schedule is empty"},
		{"0 0 2 * * *", "", "a seconds field is not supported"},
		{"0 2 * *", "", "has 4 fields, want 5"},
		{"CRON_TZ=Asia/Shanghai 0 2 * * *", "", "remove the CRON_TZ=/TZ= prefix"},
		{"TZ=UTC 0 2 * * *", "", "remove the CRON_TZ=/TZ= prefix"},
		{"61 2 * * *", "", "not a valid cron schedule"},
		{"0 2 * * *", "Mars/Olympus", "unknown time zone \"Mars/Olympus\""},
		{"0 2 * * *", "Local", "not an IANA time zone name"},
	}
	for _, c := range cases {
		_, err := Parse(c.spec, c.tz)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want error containing %q", c.spec, c.tz, err, c.want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, spec := range []string{"0 2 * * *", "*/5 * * * *", "@daily", "@hourly", "0 0 1 1 MON"} {
		if _, err := Parse(spec, "Europe/Berlin"); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

func TestNext(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	cases := []struct {
		name, spec, tz string
		from           time.Time
		want           []time.Time // consecutive runs, as UTC instants
	}{
		{
			name: "Asia/Shanghai 02:00 is 18:00 UTC the day before",
			spec: "0 2 * * *", tz: "Asia/Shanghai",
			from: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			want: []time.Time{time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)},
		},
		{
			name: "UTC default",
			spec: "0 2 * * *", tz: "",
			from: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
			want: []time.Time{time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)},
		},
		{
			// 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
			name: "New York spring forward skips the missing local time",
			spec: "30 2 * * *", tz: "America/New_York",
			from: time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			want: []time.Time{time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), time.Date(2026, 3, 10, 6, 30, 0, 0, time.UTC)},
		},
		{
			name: "New York spring forward: the day before is still EST",
			spec: "30 2 * * *", tz: "America/New_York",
			from: time.Date(2026, 3, 6, 12, 0, 0, 0, ny),
			want: []time.Time{time.Date(2026, 3, 7, 7, 30, 0, 0, time.UTC), time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)},
		},
		{
			// 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens twice.
			name: "New York fall back runs the repeated hour twice",
			spec: "30 1 * * *", tz: "America/New_York",
			from: time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			want: []time.Time{
				time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),
				time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC),
				time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.spec, c.tz)
			if err != nil {
				t.Fatal(err)
			}
			at := c.from
			for i, want := range c.want {
				at = s.Next(at)
				if !at.Equal(want) {
					t.Fatalf("run %d: got %s (%s), want %s", i, at.UTC(), at, want)
				}
			}
		})
	}
}

func TestInterval(t *testing.T) {
	s, err := Parse("*/15 * * * *", "UTC")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Interval(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)); got != 15*time.Minute {
		t.Fatalf("Interval = %s, want 15m", got)
	}
}
