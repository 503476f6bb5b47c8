package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	platformv1 "cairn.dev/apis/platform/v1"
)

// ProtectionPlan metrics users alert on (platform/components/monitoring),
// registered with controller-runtime's registry. Gauges are set from status
// after every pass (Observe), so they exist again after a restart or a
// failover; alerts compare timestamps with time(), so an RPO violation fires
// even while the orchestrator is down.
var (
	lastBackupTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_last_backup_timestamp_seconds",
		Help: "Unix time the plan's newest successful backup finished.",
	}, []string{"namespace", "name"})
	rpoSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_rpo_seconds",
		Help: "The plan's recovery point objective (spec.objectives.rpo).",
	}, []string{"namespace", "name"})
	recoveryPointTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_recovery_point_timestamp_seconds",
		Help: "Unix time of the newest verified backup (status.recoveryPoint): a restore now recovers the data as of this time.",
	}, []string{"namespace", "name"})
	lastVerificationTimestamp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_last_verification_timestamp_seconds",
		Help: "Unix time the plan's newest successful verification finished.",
	}, []string{"namespace", "name"})
	maxVerificationAgeSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_max_verification_age_seconds",
		Help: "The plan's maximum verification age (spec.objectives.maxVerificationAge).",
	}, []string{"namespace", "name"})
	verificationSucceeded = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_verification_succeeded",
		Help: "1 when the plan's newest finished verification succeeded, 0 when it failed.",
	}, []string{"namespace", "name"})
	restoreDurationSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_restore_duration_seconds",
		Help: "Restore duration of the plan's newest successful verification (the measured recovery time).",
	}, []string{"namespace", "name"})
	rtoSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_protectionplan_rto_seconds",
		Help: "The plan's recovery time objective (spec.objectives.rto).",
	}, []string{"namespace", "name"})
	verificationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_protectionplan_verifications_total",
		Help: "Finished verifications by plan and result (Succeeded, Failed).",
	}, []string{"namespace", "name", "result"})
)

// MetricNames lists every metric this operator exports.
var MetricNames = []string{
	"cairn_protectionplan_last_backup_timestamp_seconds",
	"cairn_protectionplan_rpo_seconds",
	"cairn_protectionplan_recovery_point_timestamp_seconds",
	"cairn_protectionplan_last_verification_timestamp_seconds",
	"cairn_protectionplan_max_verification_age_seconds",
	"cairn_protectionplan_verification_succeeded",
	"cairn_protectionplan_restore_duration_seconds",
	"cairn_protectionplan_rto_seconds",
	"cairn_protectionplan_verifications_total",
}

var gauges = []*prometheus.GaugeVec{
	lastBackupTimestamp, rpoSeconds, recoveryPointTimestamp, lastVerificationTimestamp,
	maxVerificationAgeSeconds, verificationSucceeded, restoreDurationSeconds, rtoSeconds,
}

func init() {
	metrics.Registry.MustRegister(verificationsTotal)
	for _, g := range gauges {
		metrics.Registry.MustRegister(g)
	}
}

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
func forget(key types.NamespacedName) {
	l := prometheus.Labels{"namespace": key.Namespace, "name": key.Name}
	for _, g := range gauges {
		g.Delete(l)
	}
	verificationsTotal.DeletePartialMatch(l)
}
