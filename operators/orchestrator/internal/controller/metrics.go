package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/kindmetrics"
)

// ProtectionPlan metrics users alert on (platform/components/monitoring),
// declared with libs/kindmetrics. Gauges are set from status
// after every pass (Observe), so they exist again after a restart or a
// failover; alerts compare timestamps with time(), so an RPO violation fires
// even while the orchestrator is down.
var (
	metricSet                 = kindmetrics.New()
	lastBackupTimestamp       = metricSet.ObjectGauge("cairn_protectionplan_last_backup_timestamp_seconds", "Unix time the plan's newest successful backup finished.")
	rpoSeconds                = metricSet.ObjectGauge("cairn_protectionplan_rpo_seconds", "The plan's recovery point objective (spec.objectives.rpo).")
	recoveryPointTimestamp    = metricSet.ObjectGauge("cairn_protectionplan_recovery_point_timestamp_seconds", "Unix time of the newest verified backup (status.recoveryPoint): a restore now recovers the data as of this time.")
	lastVerificationTimestamp = metricSet.ObjectGauge("cairn_protectionplan_last_verification_timestamp_seconds", "Unix time the plan's newest successful verification finished.")
	maxVerificationAgeSeconds = metricSet.ObjectGauge("cairn_protectionplan_max_verification_age_seconds", "The plan's maximum verification age (spec.objectives.maxVerificationAge).")
	verificationSucceeded     = metricSet.ObjectGauge("cairn_protectionplan_verification_succeeded", "1 when the plan's newest finished verification succeeded, 0 when it failed.")
	restoreDurationSeconds    = metricSet.ObjectGauge("cairn_protectionplan_restore_duration_seconds", "Restore duration of the plan's newest successful verification (the measured recovery time).")
	rtoSeconds                = metricSet.ObjectGauge("cairn_protectionplan_rto_seconds", "The plan's recovery time objective (spec.objectives.rto).")
	// identityDecrypts: 1 while the plan's identity decrypted the newest
	// verified encrypted backup, 0 once a verification found it cannot
	// (encryption.go); absent without encryption.
	identityDecrypts   = metricSet.ObjectGauge("cairn_protectionplan_identity_decrypts", "1 when the plan's identity (spec.verification.encryption) decrypted the newest verified encrypted backup, 0 when a verification found it cannot.")
	verificationsTotal = metricSet.Counter("cairn_protectionplan_verifications_total",
		"Finished verifications by plan and result (Succeeded, Failed).", "namespace", "name", "result")
)

// MetricNames lists every metric this operator exports.
var MetricNames = metricSet.Names()

// observe sets the plan's gauges from its stored status and spec.
func observe(plan *platformv1.ProtectionPlan) {
	l := prometheus.Labels{"namespace": plan.Namespace, "name": plan.Name}
	o := plan.Spec.Objectives
	rpoSeconds.With(l).Set(o.RPO.Seconds())
	if o.RTO != nil {
		rtoSeconds.With(l).Set(o.RTO.Seconds())
	} else {
		rtoSeconds.Delete(l)
	}
	if o.MaxVerificationAge != nil {
		maxVerificationAgeSeconds.With(l).Set(o.MaxVerificationAge.Seconds())
	} else {
		maxVerificationAgeSeconds.Delete(l)
	}
	if lb := plan.Status.LastBackup; lb != nil && lb.SuccessfulTime != nil {
		lastBackupTimestamp.With(l).Set(float64(lb.SuccessfulTime.Unix()))
	} else {
		// No backup yet: the plan's creation, so "no backup for longer than
		// the RPO" alerts too.
		lastBackupTimestamp.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if rp := plan.Status.RecoveryPoint; rp != nil {
		recoveryPointTimestamp.With(l).Set(float64(rp.Unix()))
	}
	if sv := plan.Status.LastSuccessfulVerification; sv != nil && sv.CompletionTime != nil {
		lastVerificationTimestamp.With(l).Set(float64(sv.CompletionTime.Unix()))
	} else {
		lastVerificationTimestamp.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if d := plan.Status.RestoreDuration; d != nil {
		restoreDurationSeconds.With(l).Set(d.Seconds())
	}
	observeDecryption(plan, l)
	if lv := plan.Status.LastVerification; lv != nil && finished(lv.Result) {
		v := 0.0
		if lv.Result == platformv1.VerificationSucceeded {
			v = 1
		}
		verificationSucceeded.With(l).Set(v)
	}
}

// recordVerification counts a verification that just finished.
func recordVerification(plan *platformv1.ProtectionPlan, lv *platformv1.VerificationRecord) {
	verificationsTotal.WithLabelValues(plan.Namespace, plan.Name, string(lv.Result)).Inc()
}

// forget drops the series of a plan that is gone.
func forget(key types.NamespacedName) { metricSet.Forget(key.Namespace, key.Name) }
