package kindmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
)

// How each kind's metrics are read from its objects, next to their
// declarations (kinds.go): the skeleton's Observe (gauges from the stored
// status, after every pass), Forget (an object gone) and what a kind's
// Transition counts. The operators hand these to libs/reconcile.

// ForgetObject drops every series of the object key names (the skeleton's
// Forget).
func (s *Set) ForgetObject(key types.NamespacedName) { s.Forget(key.Namespace, key.Name) }

// Observe sets the gauges users alert on from bj's stored status, on every
// pass: they exist after an operator restart or a failover too. interval is
// the time between two of its scheduled runs (zero: the schedule does not
// parse).
func (m *BackupJob) Observe(bj *backupv1.BackupJob, interval time.Duration) {
	if t := bj.Status.LastSuccessfulTime; t != nil {
		m.LastSuccess.WithLabelValues(bj.Namespace, bj.Name).Set(float64(t.Unix()))
	}
	// A BackupJob without failures has no series (the alerts read "> 0"):
	// no memory spent on a zero for every BackupJob.
	if n := bj.Status.ConsecutiveFailures; n > 0 {
		m.ConsecutiveFailures.WithLabelValues(bj.Namespace, bj.Name).Set(float64(n))
	} else {
		m.ConsecutiveFailures.DeleteLabelValues(bj.Namespace, bj.Name)
	}
	// The interval is only read against a run's series (last success, run
	// duration): a BackupJob that never ran has none, and no interval
	// series either (about 0.4 KiB per BackupJob, issue 11).
	if interval > 0 && (bj.Status.LastBackupTime != nil || bj.Status.LastSuccessfulTime != nil) {
		m.Interval.WithLabelValues(bj.Namespace, bj.Name).Set(interval.Seconds())
	} else {
		m.Interval.DeleteLabelValues(bj.Namespace, bj.Name)
	}
	// Point-in-time: series only while it is on (alerts: not ready for
	// long, any gap).
	if bj.Spec.PointInTime == nil {
		m.PointInTimeReady.DeleteLabelValues(bj.Namespace, bj.Name)
		m.PointInTimeGaps.DeleteLabelValues(bj.Namespace, bj.Name)
		m.PointInTimeRetainedWAL.DeleteLabelValues(bj.Namespace, bj.Name)
		return
	}
	ready := 0.0
	if conditions.IsTrue(bj, backupv1.PointInTimeReadyCondition) {
		ready = 1
	}
	m.PointInTimeReady.WithLabelValues(bj.Namespace, bj.Name).Set(ready)
	gaps := 0
	if st := bj.Status.PointInTime; st != nil {
		gaps = len(st.Gaps)
	}
	m.PointInTimeGaps.WithLabelValues(bj.Namespace, bj.Name).Set(float64(gaps))
	if st := bj.Status.PointInTime; st != nil && st.Check != nil && st.Check.Slot != "" {
		m.PointInTimeRetainedWAL.WithLabelValues(bj.Namespace, bj.Name).Set(float64(st.Check.RetainedWALBytes))
	} else {
		m.PointInTimeRetainedWAL.DeleteLabelValues(bj.Namespace, bj.Name)
	}
}

// Finish counts rj, which just reached Succeeded or Failed, and the time
// of the last success from its source.
func (m *RestoreJob) Finish(rj *restorev1.RestoreJob) {
	m.Finished.Record(rj.Namespace, string(rj.Status.Phase), rj.Status.StartTime, rj.Status.CompletionTime)
	if rj.Status.Phase == restorev1.PhaseSucceeded {
		at := time.Now()
		if rj.Status.CompletionTime != nil {
			at = rj.Status.CompletionTime.Time
		}
		m.LastSuccess.WithLabelValues(rj.Namespace, rj.Status.Source).Set(float64(at.Unix()))
	}
}

// Finish counts mj, which just reached Succeeded or Failed.
func (m *MigrationJob) Finish(mj *migrationv1.MigrationJob) {
	m.Finished.Record(mj.Namespace, string(mj.Status.Phase), mj.Status.StartTime, mj.Status.CompletionTime)
}

// Observe sets the plan's gauges from its stored status and spec.
func (m *ProtectionPlan) Observe(plan *platformv1.ProtectionPlan) {
	l := prometheus.Labels{"namespace": plan.Namespace, "name": plan.Name}
	o := plan.Spec.Objectives
	m.RPO.With(l).Set(o.RPO.Seconds())
	optional(m.RTO, l, o.RTO)
	optional(m.MaxVerificationAge, l, o.MaxVerificationAge)
	if lb := plan.Status.LastBackup; lb != nil && lb.SuccessfulTime != nil {
		m.LastBackup.With(l).Set(float64(lb.SuccessfulTime.Unix()))
	} else {
		// No backup yet: the plan's creation, so "no backup for longer than
		// the RPO" alerts too.
		m.LastBackup.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if rp := plan.Status.RecoveryPoint; rp != nil {
		m.RecoveryPoint.With(l).Set(float64(rp.Unix()))
	}
	if r := plan.Status.RPO; r != nil {
		for _, b := range []platformv1.RPOBasis{platformv1.RPOBasisPointInTime, platformv1.RPOBasisBackup} {
			if b != r.Basis {
				m.RPOBasis.DeleteLabelValues(plan.Namespace, plan.Name, string(b))
			}
		}
		m.RPOBasis.WithLabelValues(plan.Namespace, plan.Name, string(r.Basis)).Set(1)
	}
	if sv := plan.Status.LastSuccessfulVerification; sv != nil && sv.CompletionTime != nil {
		m.LastVerification.With(l).Set(float64(sv.CompletionTime.Unix()))
	} else {
		m.LastVerification.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if d := plan.Status.RestoreDuration; d != nil {
		m.RestoreDuration.With(l).Set(d.Seconds())
	}
	switch c := conditions.Get(plan, platformv1.DecryptionVerifiedCondition); {
	case c != nil && c.Status == metav1.ConditionTrue:
		m.IdentityDecrypts.With(l).Set(1)
	case c != nil && c.Status == metav1.ConditionFalse:
		m.IdentityDecrypts.With(l).Set(0)
	default:
		m.IdentityDecrypts.Delete(l)
	}
	switch lv := plan.Status.LastVerification; {
	case lv == nil:
	case lv.Result == platformv1.VerificationSucceeded:
		m.VerificationSucceeded.With(l).Set(1)
	case lv.Result == platformv1.VerificationFailed:
		m.VerificationSucceeded.With(l).Set(0)
	}
}

// optional sets g to d, or drops its series while d is unset.
func optional(g *prometheus.GaugeVec, l prometheus.Labels, d *metav1.Duration) {
	if d != nil {
		g.With(l).Set(d.Seconds())
	} else {
		g.Delete(l)
	}
}

// Verified counts a verification of plan that just finished.
func (m *ProtectionPlan) Verified(plan *platformv1.ProtectionPlan, lv *platformv1.VerificationRecord) {
	m.Verifications.WithLabelValues(plan.Namespace, plan.Name, string(lv.Result)).Inc()
}
