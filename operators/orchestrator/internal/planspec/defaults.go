// Package planspec holds what both the ProtectionPlan webhooks and the
// controller need to know about a plan's spec: its validation and the
// scratch-database guard (the scratch database is never the protected one).
// The controller applies the defaults (platformv1.ProtectionPlanSpec.SetDefaults)
// and checks again before every verification, for plans admitted while the
// webhooks were not running.
package planspec

import (
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// SetDefaults fills the spec fields left empty (see
// platformv1.ProtectionPlanSpec.SetDefaults). Fields that are set are never
// changed.
func SetDefaults(spec *platformv1.ProtectionPlanSpec) { spec.SetDefaults() }

// DefaultPort is the engine's usual port, or 0 for an unknown engine.
func DefaultPort(engine cairnv1.DatabaseEngine) int32 { return cairnv1.DefaultPort(engine) }

// ScratchTarget is the database a verification restores into, as a
// RestoreJob target: the scratch server and database with the protected
// database's engine.
func ScratchTarget(spec *platformv1.ProtectionPlanSpec) cairnv1.DatabaseRef {
	s := spec.Verification.RestoreInto
	port := s.Port
	if port == 0 {
		port = DefaultPort(spec.Database.Engine)
	}
	return cairnv1.DatabaseRef{
		Engine: spec.Database.Engine, Host: s.Host, Port: port, Database: s.Database,
		CredentialsSecretRef: s.CredentialsSecretRef,
	}
}
