package agentjob

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"cairn.dev/agent/contract"
)

// Retention is a calendar-tier retention policy for backup (prune after
// success) and prune: the tiers and minVerified, the time zone their
// periods are counted in, and whether the prune only reports.
type Retention struct {
	Policy   contract.Retention
	TimeZone string
	DryRun   bool
}

func (r *Retention) env() []corev1.EnvVar {
	if r == nil {
		return nil
	}
	b, _ := json.Marshal(r.Policy) // plain ints: cannot fail
	env := []corev1.EnvVar{{Name: contract.EnvRetention, Value: string(b)}}
	if r.TimeZone != "" {
		env = append(env, corev1.EnvVar{Name: contract.EnvTimeZone, Value: r.TimeZone})
	}
	if r.DryRun {
		env = append(env, corev1.EnvVar{Name: contract.EnvPruneDryRun, Value: strconv.FormatBool(r.DryRun)})
	}
	return env
}
