// Package v1 is platform.cairn.dev/v1: ProtectionPlan, the orchestrator's
// kind. One ProtectionPlan protects one database: it owns the database's
// BackupJob and the RestoreJobs that verify its backups restore, and says
// whether the database is recoverable and how old the recovered data would be.
//
// +kubebuilder:object:generate=true
// +groupName=platform.cairn.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this package's kinds.
	GroupVersion = schema.GroupVersion{Group: "platform.cairn.dev", Version: "v1"}
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
