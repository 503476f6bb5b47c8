package controller

import (
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/references"
)

// A BackupJob's spec.encryption.recipients may be a ConfigMap key (public
// keys are not secret): the operator checks that it exists (metadata only)
// and is woken when it appears.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch

// encryptionReferences are the recipients' Secret (with its key) or
// ConfigMap that bj's backups need: without them a backup pod would wait in
// CreateContainerConfigError until its deadline.
func encryptionReferences(bj *backupv1.BackupJob) []references.Ref {
	return agentjob.EncryptionReferences(bj.Namespace, agentjob.BackupEncryption(bj.Spec.Encryption), "spec.encryption")
}
