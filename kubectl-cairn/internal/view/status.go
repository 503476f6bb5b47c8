// Package view turns Cairn's objects into what the plugin prints: one row
// per protected database, ordered by what needs attention first. It is
// pure (objects and a clock in, rows out), so its output is tested against
// golden files.
package view

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// Severity orders rows: what needs a human first.
type Severity int

// Severities, most urgent first.
const (
	Critical Severity = iota // failed, stalled, objectives violated
	Action                   // waiting for a human (cutover approval)
	Warning                  // not yet protected, or degraded
	OK
)

func (s Severity) String() string {
	return [...]string{"critical", "action", "warning", "ok"}[s]
}

// Row is one object in `kubectl cairn status`.
type Row struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	// LastSuccess is when the newest successful backup (or migration) finished.
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
	// NextRun is the next scheduled backup or verification.
	NextRun *time.Time `json:"nextRun,omitempty"`
	// RecoveryPoint is the newest verified backup's time (plans).
	RecoveryPoint *time.Time `json:"recoveryPoint,omitempty"`
	// Objectives: met, violated, unknown, or "" when the kind has none.
	Objectives string `json:"objectives,omitempty"`
	// RPO and RTO: the objective and whether it is met ("26h ok").
	RPO string `json:"rpo,omitempty"`
	RTO string `json:"rto,omitempty"`
	// Schedule and TimeZone (wide).
	Schedule string `json:"schedule,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
	// Artifact is the newest successful backup's artifact (wide).
	Artifact string `json:"artifact,omitempty"`
	// Server is the database server the newest run reported, engine and
	// version, e.g. "postgres 17.12" (status.server; wide).
	Server   string   `json:"server,omitempty"`
	Severity Severity `json:"-"`
	Level    string   `json:"attentionLevel"`
	// Attention says what needs doing, most urgent first; empty when fine.
	Attention string `json:"attention,omitempty"`
}

// Objects are what status summarises.
type Objects struct {
	BackupJobs    []backupv1.BackupJob
	Plans         []platformv1.ProtectionPlan
	MigrationJobs []migrationv1.MigrationJob
}

// Status computes the rows at now, most urgent first, then by namespace,
// kind and name. A BackupJob a plan owns is shown in the plan's row (its
// backups are the plan's), not twice.
func Status(objs Objects, now time.Time) []Row {
	var rows []Row
	planBackups := map[string]*backupv1.BackupJob{}
	for i := range objs.BackupJobs {
		bj := &objs.BackupJobs[i]
		if plan := bj.Labels[platformv1.PlanLabel]; plan != "" {
			planBackups[bj.Namespace+"/"+plan] = bj
			continue
		}
		rows = append(rows, backupRow(bj, now))
	}
	for i := range objs.Plans {
		p := &objs.Plans[i]
		rows = append(rows, planRow(p, planBackups[p.Namespace+"/"+p.Name], now))
	}
	for i := range objs.MigrationJobs {
		rows = append(rows, migrationRow(&objs.MigrationJobs[i]))
	}
	for i := range rows {
		rows[i].Level = rows[i].Severity.String()
	}
	sort.SliceStable(rows, func(a, b int) bool {
		ra, rb := rows[a], rows[b]
		if ra.Severity != rb.Severity {
			return ra.Severity < rb.Severity
		}
		if ra.Namespace != rb.Namespace {
			return ra.Namespace < rb.Namespace
		}
		if ra.Kind != rb.Kind {
			return ra.Kind < rb.Kind
		}
		return ra.Name < rb.Name
	})
	return rows
}

func backupRow(bj *backupv1.BackupJob, now time.Time) Row {
	st := bj.Status
	r := Row{Namespace: bj.Namespace, Kind: "BackupJob", Name: bj.Name, Phase: string(st.Phase),
		LastSuccess: t(st.LastSuccessfulTime), NextRun: t(st.NextScheduleTime),
		Schedule: bj.Spec.Schedule, TimeZone: bj.Spec.TimeZone, Severity: OK}
	if st.LastArtifact != nil {
		r.Artifact = st.LastArtifact.Path
	}
	r.Server = server(st.Server)
	r.Severity, r.Attention = backupAttention(bj, now)
	return r
}

// server prints a recorded server ("postgres 17.12"), "" for none.
func server(s *cairnv1.ServerInfo) string {
	if s == nil {
		return ""
	}
	return s.Engine + " " + s.Version
}

// backupAttention says what is wrong with a BackupJob, if anything.
func backupAttention(bj *backupv1.BackupJob, now time.Time) (Severity, string) {
	st := bj.Status
	if c := meta.FindStatusCondition(st.Conditions, cairnv1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		return Critical, fmt.Sprintf("stalled (%s): %s", c.Reason, c.Message)
	}
	switch {
	case st.Phase == backupv1.PhaseFailed || st.LastResult == backupv1.RunFailed:
		msg := fmt.Sprintf("last run failed (%d in a row)", st.ConsecutiveFailures)
		if st.LastRunMessage != "" {
			msg += ": " + st.LastRunMessage
		}
		return Critical, msg
	case st.Phase == backupv1.PhaseSuspended:
		return Warning, "suspended: no backups run"
	case st.LastSuccessfulTime == nil:
		return Warning, "no successful backup yet"
	}
	return OK, ""
}

func planRow(p *platformv1.ProtectionPlan, bj *backupv1.BackupJob, now time.Time) Row {
	st := p.Status
	r := Row{Namespace: p.Namespace, Kind: "ProtectionPlan", Name: p.Name, Phase: string(st.Phase),
		RecoveryPoint: t(st.RecoveryPoint), Schedule: p.Spec.Backup.Schedule, TimeZone: p.Spec.TimeZone, Severity: OK}
	if lb := st.LastBackup; lb != nil {
		r.LastSuccess = t(lb.SuccessfulTime)
		if lb.Artifact != nil {
			r.Artifact = lb.Artifact.Path
		}
	}
	if bj != nil {
		r.NextRun = t(bj.Status.NextScheduleTime)
		r.Server = server(bj.Status.Server)
	}
	r.RPO = objective(p.Spec.Objectives.RPO.Duration, r.LastSuccess == nil, r.LastSuccess != nil && now.Sub(*r.LastSuccess) <= p.Spec.Objectives.RPO.Duration)
	if rto := p.Spec.Objectives.RTO; rto != nil {
		r.RTO = objective(rto.Duration, st.RestoreDuration == nil, st.RestoreDuration != nil && st.RestoreDuration.Duration <= rto.Duration)
	}
	var attention []string
	sev := OK
	add := func(s Severity, msg string) {
		if s < sev {
			sev = s
		}
		attention = append(attention, msg)
	}
	if c := meta.FindStatusCondition(st.Conditions, cairnv1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
		add(Critical, fmt.Sprintf("stalled (%s): %s", c.Reason, c.Message))
	}
	if bj != nil {
		if s, msg := backupAttention(bj, now); s != OK {
			add(s, "backup: "+msg)
		}
	}
	for _, typ := range []string{platformv1.RecoverabilityVerifiedCondition, platformv1.ObjectivesMetCondition} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		switch {
		case c == nil:
		case c.Status == metav1.ConditionFalse && c.Reason != platformv1.VerificationRunningReason:
			add(Critical, fmt.Sprintf("%s: %s", typ, c.Message))
		case c.Status == metav1.ConditionUnknown:
			add(Warning, fmt.Sprintf("%s unknown: %s", typ, c.Message))
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, platformv1.ObjectivesMetCondition); c != nil {
		r.Objectives = map[metav1.ConditionStatus]string{metav1.ConditionTrue: "met", metav1.ConditionFalse: "violated", metav1.ConditionUnknown: "unknown"}[c.Status]
	}
	if m := st.Migration; m != nil && m.Phase == migrationv1.PhaseReadyForCutover {
		add(Action, fmt.Sprintf("migration %s ready for cutover: approve it in the plan's spec.migration.template", m.Name))
	}
	r.Severity, r.Attention = sev, strings.Join(attention, "; ")
	return r
}

func objective(d time.Duration, unknown, met bool) string {
	switch {
	case unknown:
		return Short(d) + " ?"
	case met:
		return Short(d) + " ok"
	}
	return Short(d) + " MISSED"
}

// Short prints a duration without zero minutes and seconds: 26h, 1h30m, 4s.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func migrationRow(mj *migrationv1.MigrationJob) Row {
	st := mj.Status
	r := Row{Namespace: mj.Namespace, Kind: "MigrationJob", Name: mj.Name, Phase: string(st.Phase), Severity: OK}
	if st.Phase == migrationv1.PhaseSucceeded {
		r.LastSuccess = t(st.CompletionTime)
	}
	switch st.Phase {
	case migrationv1.PhaseFailed:
		r.Severity, r.Attention = Critical, "failed"
		if c := meta.FindStatusCondition(st.Conditions, cairnv1.StalledCondition); c != nil {
			r.Attention = fmt.Sprintf("failed (%s): %s", c.Reason, c.Message)
		}
	case migrationv1.PhaseReadyForCutover:
		if mj.Spec.Cutover.Mode == migrationv1.CutoverManual && !mj.Spec.Cutover.Approved {
			r.Severity, r.Attention = Action, "verified, waiting for approval: kubectl cairn approve "+mj.Name
		}
	}
	if r.Severity == OK {
		if c := meta.FindStatusCondition(st.Conditions, cairnv1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
			r.Severity, r.Attention = Critical, fmt.Sprintf("stalled (%s): %s", c.Reason, c.Message)
		}
	}
	return r
}

func t(m *metav1.Time) *time.Time {
	if m == nil {
		return nil
	}
	v := m.Time
	return &v
}
