// Package v1 is migration.cairn.dev/v1: MigrationJob, a one-off move of a
// database into another database of the same engine, in the same or another
// cluster, verified table by table, with a gated cutover.
//
// +kubebuilder:object:generate=true
// +groupName=migration.cairn.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: "migration.cairn.dev", Version: "v1"}
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
