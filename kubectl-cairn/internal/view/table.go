package view

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// Ago prints a past instant as kubectl prints ages ("5m ago"), "never" for none.
func Ago(at *time.Time, now time.Time) string {
	if at == nil {
		return "never"
	}
	if at.After(now) {
		return "just now"
	}
	return duration.HumanDuration(now.Sub(*at)) + " ago"
}

// In prints a future instant ("in 3m"), "-" for none.
func In(at *time.Time, now time.Time) string {
	switch {
	case at == nil:
		return "-"
	case !at.After(now):
		return "due"
	}
	return "in " + duration.HumanDuration(at.Sub(now))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Table writes rows as kubectl writes tables; wide adds the schedule, time
// zone, database server (engine and version) and newest artifact.
func Table(w io.Writer, rows []Row, now time.Time, allNamespaces, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := []string{"KIND", "NAME", "PHASE", "LAST SUCCESS", "NEXT RUN", "RECOVERY POINT", "RPO", "RTO", "OBJECTIVES"}
	if allNamespaces {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	if wide {
		cols = append(cols, "SCHEDULE", "TIMEZONE", "SERVER", "ARTIFACT")
	}
	cols = append(cols, "ATTENTION")
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range rows {
		rp := "-"
		if r.RecoveryPoint != nil {
			rp = Ago(r.RecoveryPoint, now)
		}
		vals := []string{r.Kind, r.Name, dash(r.Phase), Ago(r.LastSuccess, now), In(r.NextRun, now), rp,
			dash(r.RPO), dash(r.RTO), dash(r.Objectives)}
		if r.Kind == "MigrationJob" && r.LastSuccess == nil {
			vals[3] = "-"
		}
		if allNamespaces {
			vals = append([]string{r.Namespace}, vals...)
		}
		if wide {
			vals = append(vals, dash(r.Schedule), dash(r.TimeZone), dash(r.Server), dash(r.Artifact))
		}
		att := "-"
		if r.Attention != "" {
			att = strings.ToUpper(r.Level) + ": " + oneLine(r.Attention)
		}
		vals = append(vals, att)
		fmt.Fprintln(tw, strings.Join(vals, "\t"))
	}
	return tw.Flush()
}

// oneLine keeps a message on one line of a table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
