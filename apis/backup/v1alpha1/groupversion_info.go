// Package v1alpha1 is backup.cairn.dev/v1alpha1: BackupJob in its original
// flat shape (databaseHost, schedule, retentionDays, maxRetries). It is served,
// not stored, and deprecated: every object is stored as backup.cairn.dev/v1, the
// conversion hub, and converted by the backup operator's conversion webhook.
//
// Conversion is lossless in both directions. Fields v1 has and v1alpha1 lacks
// travel in the annotation V1FieldsAnnotation on the v1alpha1 object (see
// ConvertFrom and ConvertTo); a v1alpha1 object without that annotation gets
// the legacy defaults documented on ConvertTo.
//
// +kubebuilder:object:generate=true
// +groupName=backup.cairn.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: "backup.cairn.dev", Version: "v1alpha1"}
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
