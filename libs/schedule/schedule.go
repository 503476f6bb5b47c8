// Package schedule parses cron schedules exactly as the Kubernetes CronJob
// controller does (robfig/cron/v3, standard 5 fields and @-macros) and computes
// the next run time in an IANA time zone. Time zone data is embedded
// (time/tzdata), so results do not depend on the host's zoneinfo.
//
// A time zone is always a separate field, never a CRON_TZ= or TZ= prefix in the
// schedule: the CronJob API rejects the prefix, and a zone written twice is a
// zone that can disagree with itself.
package schedule

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // embed the IANA database: results must not depend on the host

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron schedule in a time zone.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// Parse parses a 5-field cron spec (or an @-macro such as @daily) to be read in
// the IANA time zone tz ("" means UTC). The errors name what is wrong and how to
// fix it; they do not name the field, so callers can prefix their field path.
func Parse(spec, tz string) (*Schedule, error) {
	if err := checkSpec(spec); err != nil {
		return nil, err
	}
	c, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid cron schedule: %v; use 5 fields \"minute hour day-of-month month day-of-week\", e.g. \"0 2 * * *\"", spec, err)
	}
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	return &Schedule{cron: c, loc: loc}, nil
}

func checkSpec(spec string) error {
	s := strings.TrimSpace(spec)
	if s == "" {
		return fmt.Errorf("schedule is empty; use 5 fields \"minute hour day-of-month month day-of-week\", e.g. \"0 2 * * *\"")
	}
	if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
		return fmt.Errorf("%q carries a time zone prefix; remove the CRON_TZ=/TZ= prefix and set the time zone in the timeZone field", spec)
	}
	if !strings.HasPrefix(s, "@") {
		if n := len(strings.Fields(s)); n != 5 {
			hint := ""
			if n == 6 {
				hint = " (a seconds field is not supported: Kubernetes CronJobs run at most once a minute)"
			}
			return fmt.Errorf("%q has %d fields, want 5%s; use \"minute hour day-of-month month day-of-week\", e.g. \"0 2 * * *\"", spec, n, hint)
		}
	}
	return nil
}

// LoadLocation returns the IANA time zone named tz; "" is UTC. "Local" is
// rejected: the operator's host zone is not the user's.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" || strings.HasPrefix(tz, "/") || strings.Contains(tz, "..") {
		return nil, fmt.Errorf("%q is not an IANA time zone name; use a name such as \"UTC\" or \"Asia/Shanghai\"", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as \"UTC\", \"Europe/Berlin\" or \"Asia/Shanghai\"", tz)
	}
	return loc, nil
}

// Next returns the first run strictly after t, as an instant (its location is
// the schedule's zone). Like the CronJob controller, a local time that does not
// exist (skipped by a daylight-saving jump forward) does not run that day, and
// a local time that occurs twice (the hour repeated when clocks go back) runs
// at both instants.
func (s *Schedule) Next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.loc))
}

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Interval estimates the time between two consecutive runs after t; used for
// alert thresholds ("no success for twice the interval").
func (s *Schedule) Interval(t time.Time) time.Duration {
	a := s.Next(t)
	return s.Next(a).Sub(a)
}
