// Package restorespec holds what both the RestoreJob webhooks and the
// controller need to know about a RestoreJob spec: its defaults, its
// validation, and the overwrite guard that refuses to restore into the
// database a BackupJob backs up. The defaults themselves are the API's
// (cairn.dev/apis/restore/v1); the controller checks the spec again, for
// objects admitted while the webhooks were not running.
package restorespec

import (
	restorev1 "cairn.dev/apis/restore/v1"
)

// SetDefaults fills the spec fields left empty with the API's defaults
// (restorev1.RestoreJobSpec.SetDefaults: maxRetries and activeDeadlineSeconds
// from the CRD's +kubebuilder:default markers, target.port from the engine).
//
// Deprecated: the API server applies these defaults to every RestoreJob it
// returns (CRD defaults; the port from the deploy base's
// MutatingAdmissionPolicy, and SameDatabase reads an empty port as the
// engine's). Call spec.SetDefaults directly where a spec built in Go needs
// them; this wrapper stays only until the controller no longer calls it.
func SetDefaults(spec *restorev1.RestoreJobSpec) {
	spec.SetDefaults()
}
