package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/kindmetrics"
)

// The ProtectionPlan metrics users alert on (libs/kindmetrics): gauges set
// from status after every pass (Observe).
var metrics = kindmetrics.NewProtectionPlan()

// MetricNames lists every metric this operator exports.
var MetricNames = metrics.Names()

// observe sets the plan's gauges from its stored status and spec.
func observe(plan *platformv1.ProtectionPlan) {
	l := prometheus.Labels{"namespace": plan.Namespace, "name": plan.Name}
	o := plan.Spec.Objectives
	metrics.RPO.With(l).Set(o.RPO.Seconds())
	if o.RTO != nil {
		metrics.RTO.With(l).Set(o.RTO.Seconds())
	} else {
		metrics.RTO.Delete(l)
	}
	if o.MaxVerificationAge != nil {
		metrics.MaxVerificationAge.With(l).Set(o.MaxVerificationAge.Seconds())
	} else {
		metrics.MaxVerificationAge.Delete(l)
	}
	if lb := plan.Status.LastBackup; lb != nil && lb.SuccessfulTime != nil {
		metrics.LastBackup.With(l).Set(float64(lb.SuccessfulTime.Unix()))
	} else {
		// No backup yet: the plan's creation, so "no backup for longer than
		// the RPO" alerts too.
		metrics.LastBackup.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if rp := plan.Status.RecoveryPoint; rp != nil {
		metrics.RecoveryPoint.With(l).Set(float64(rp.Unix()))
	}
	if sv := plan.Status.LastSuccessfulVerification; sv != nil && sv.CompletionTime != nil {
		metrics.LastVerification.With(l).Set(float64(sv.CompletionTime.Unix()))
	} else {
		metrics.LastVerification.With(l).Set(float64(plan.CreationTimestamp.Unix()))
	}
	if d := plan.Status.RestoreDuration; d != nil {
		metrics.RestoreDuration.With(l).Set(d.Seconds())
	}
	observeDecryption(plan, l)
	if lv := plan.Status.LastVerification; lv != nil && finished(lv.Result) {
		v := 0.0
		if lv.Result == platformv1.VerificationSucceeded {
			v = 1
		}
		metrics.VerificationSucceeded.With(l).Set(v)
	}
}

// recordVerification counts a verification that just finished.
func recordVerification(plan *platformv1.ProtectionPlan, lv *platformv1.VerificationRecord) {
	metrics.Verifications.WithLabelValues(plan.Namespace, plan.Name, string(lv.Result)).Inc()
}

// forget drops the series of a plan that is gone.
func forget(key types.NamespacedName) { metrics.Forget(key.Namespace, key.Name) }
