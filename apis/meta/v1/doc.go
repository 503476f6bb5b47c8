// Package v1 holds the types and constants shared by every Cairn API group:
// condition types and reasons, database and storage references, and the
// artifact reference the agent reports. It holds no code beyond small helpers
// on these types; behaviour lives in cairn.dev/libs.
//
// +kubebuilder:object:generate=true
package v1
