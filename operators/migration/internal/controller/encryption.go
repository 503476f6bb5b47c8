package controller

import (
	"cairn.dev/agent/contract"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/references"
)

// A Store transfer's spec.transfer.encryption.recipients may be a ConfigMap
// key: the operator checks that it exists (metadata only).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// transferEncryption is what a Store transfer's step needs of
// spec.transfer.encryption: the export encrypts to the recipients, the
// import decrypts with the identity; no other step reads the artifact's
// bytes (verify reads the manifest's inventory).
func transferEncryption(step string, spec *migrationv1.MigrationJobSpec) *agentjob.Encryption {
	e := spec.Transfer.Encryption
	if e == nil {
		return nil
	}
	switch step {
	case contract.StepExport:
		r := e.Recipients
		return &agentjob.Encryption{Recipients: &r}
	case contract.StepImport:
		id := e.IdentitySecretRef
		return &agentjob.Encryption{Identity: &id}
	}
	return nil
}

// exportKeyReferences: the recipients the export (in this cluster) needs.
func exportKeyReferences(ns string, spec *migrationv1.MigrationJobSpec) []references.Ref {
	return agentjob.EncryptionReferences(ns, transferEncryption(contract.StepExport, spec), "spec.transfer.encryption")
}

// importKeyReferences: the identity the import (in the target's cluster
// and namespace) needs.
func importKeyReferences(ns string, spec *migrationv1.MigrationJobSpec) []references.Ref {
	return agentjob.EncryptionReferences(ns, transferEncryption(contract.StepImport, spec), "spec.transfer.encryption")
}
