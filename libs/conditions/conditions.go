// Package conditions sets and reads metav1.Conditions on Cairn objects and
// keeps the kstatus trio consistent: Ready, Reconciling (abnormal-true) and
// Stalled (abnormal-true). With these, sigs.k8s.io/cli-utils' kstatus — and so
// `kubectl wait`, Flux and Argo CD — compute Current, InProgress or Failed.
//
// A parent summarises its children the Cluster API way (merge.go): Mirror
// copies one child's condition (message prefixed with the child's name),
// Aggregate merges one condition type across many children, Summary merges
// an object's own conditions into Ready. Issues (False; True for Stalled and
// Reconciling) come before Unknowns; a missing condition is Unknown; True
// only when every source is fine.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Object is a Kubernetes object with status conditions.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Set sets condition typ on obj, stamped with obj's generation. The transition
// time changes only when the status does (meta.SetStatusCondition).
func Set(obj Object, typ string, status metav1.ConditionStatus, reason, message string) {
	conds := obj.GetConditions()
	meta.SetStatusCondition(&conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
	obj.SetConditions(conds)
}

// Get returns condition typ of obj, or nil.
func Get(obj Object, typ string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetConditions(), typ)
}

// IsTrue reports whether condition typ of obj is True.
func IsTrue(obj Object, typ string) bool {
	return meta.IsStatusConditionTrue(obj.GetConditions(), typ)
}

// Delete removes condition typ from obj.
func Delete(obj Object, typ string) {
	conds := obj.GetConditions()
	meta.RemoveStatusCondition(&conds, typ)
	obj.SetConditions(conds)
}

// MarkReady says the desired state is achieved: Ready=True, and neither
// Reconciling nor Stalled. kstatus: Current.
func MarkReady(obj Object, reason, message string) {
	Set(obj, cairnv1.ReadyCondition, metav1.ConditionTrue, reason, message)
	Delete(obj, cairnv1.ReconcilingCondition)
	Delete(obj, cairnv1.StalledCondition)
}

// MarkReconciling says the controller is working towards the desired state:
// Reconciling=True, Ready=False with the same reason, not Stalled.
// kstatus: InProgress.
func MarkReconciling(obj Object, reason, message string) {
	Set(obj, cairnv1.ReconcilingCondition, metav1.ConditionTrue, reason, message)
	Set(obj, cairnv1.ReadyCondition, metav1.ConditionFalse, reason, message)
	Delete(obj, cairnv1.StalledCondition)
}

// MarkStalled says progress needs a human (invalid spec, a permanent failure):
// Stalled=True, Ready=False with the same reason, not Reconciling.
// kstatus: Failed.
func MarkStalled(obj Object, reason, message string) {
	Set(obj, cairnv1.StalledCondition, metav1.ConditionTrue, reason, message)
	Set(obj, cairnv1.ReadyCondition, metav1.ConditionFalse, reason, message)
	Delete(obj, cairnv1.ReconcilingCondition)
}

// MarkNotReady says the desired state is not achieved, but the controller is
// neither working on it nor stuck: Ready=False only (e.g. the last backup run
// failed and the next scheduled run may fix it). kstatus: InProgress.
func MarkNotReady(obj Object, reason, message string) {
	Set(obj, cairnv1.ReadyCondition, metav1.ConditionFalse, reason, message)
	Delete(obj, cairnv1.ReconcilingCondition)
	Delete(obj, cairnv1.StalledCondition)
}
