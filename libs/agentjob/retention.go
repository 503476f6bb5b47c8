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

// ObjectLock is S3 Object Lock for a backup: the mode (GOVERNANCE or
// COMPLIANCE, as S3 spells them) and, when set, how many days from its
// start each artifact stays locked (else the agent's retention days).
type ObjectLock struct {
	Mode string
	Days int32
}

func (o *ObjectLock) env() []corev1.EnvVar {
	if o == nil {
		return nil
	}
	env := []corev1.EnvVar{{Name: contract.EnvS3ObjectLock, Value: o.Mode}}
	if o.Days > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvS3ObjectLockDays, Value: strconv.Itoa(int(o.Days))})
	}
	return env
}
