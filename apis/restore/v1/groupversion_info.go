// Package v1 is restore.cairn.dev/v1: RestoreJob, a one-off restore of one
// stored backup artifact into a database.
//
// +kubebuilder:object:generate=true
// +groupName=restore.cairn.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: "restore.cairn.dev", Version: "v1"}
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
