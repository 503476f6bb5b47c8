package agentjob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// Every role the renderer knows renders only variables of the contract.
func TestRolesRenderTheContract(t *testing.T) {
	db := &cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Host: "db", Port: 3306, Database: "app",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db-creds"}}
	s3p := s3.DeepCopy()
	s3p.S3.PartSizeMiB = ptr.To[int32](16)
	roles := map[string]Spec{
		"backup pvc": spec(pvc),
		"backup s3":  {Command: contract.CommandBackup, Database: db, Storage: *s3p, RetentionDays: 3},
		"list":       {Command: contract.CommandList, Storage: pvc},
		"backup with tiers": {Command: contract.CommandBackup, Database: db, Storage: pvc,
			Retention: &Retention{Policy: contract.Retention{KeepDaily: 7, MinVerified: 1}, TimeZone: "Asia/Shanghai", DryRun: true}},
		"prune with tiers":     {Command: contract.CommandPrune, Storage: pvc, Retention: &Retention{Policy: contract.Retention{KeepLast: 3}}},
		"verification restore": {Command: contract.CommandRestore, Database: db, Storage: pvc, Restore: &RestoreSpec{RecordVerification: true}},
		"backup encrypted, secret": {Command: contract.CommandBackup, Database: db, Storage: pvc,
			Encryption: BackupEncryption(&cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{SecretKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "recipients"}}})},
		"backup encrypted, configmap": {Command: contract.CommandBackup, Database: db, Storage: pvc,
			Encryption: BackupEncryption(&cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{ConfigMapKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "recipients"}}})},
		"restore encrypted": {Command: contract.CommandRestore, Database: db, Storage: pvc,
			Encryption: RestoreEncryption(&cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "key", Key: "identity"}})},
		"backup in parallel": {Command: contract.CommandBackup, Database: db, Storage: pvc, Parallelism: 4},
		"restore in parallel": {Command: contract.CommandRestore, Database: db, Storage: pvc,
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}},
		"archiver postgres": {Command: contract.CommandArchive, Database: db, Storage: pvc,
			PointInTime: &PointInTime{MaxSegmentAge: time.Minute, MaxLag: 5 * time.Minute, MaxRetainedWALBytes: 10 << 30}},
		"archive check": {Command: contract.CommandArchiveStatus, Database: db, Storage: *s3p,
			PointInTime: &PointInTime{MaxRetainedWALBytes: 1 << 30}},
		"backup base":         {Command: contract.CommandBackup, Database: db, Storage: pvc, PointInTime: &PointInTime{Base: true}},
		"restore to a second": {Command: contract.CommandRestore, Database: db, Storage: pvc, PointInTime: &PointInTime{RecoveryTarget: "2026-12-05T10:00:00+08:00"}},
		"prune":               {Command: contract.CommandPrune, Storage: *s3p, RetentionDays: 1},
		"delete":              {Command: contract.CommandDelete, Storage: *s3p},
		"restore with checks": {Command: contract.CommandRestore, Database: db, Storage: pvc, Artifact: "a.sql.zst",
			Restore: &RestoreSpec{ChecksJSON: `[{"name":"n","sql":"select 1","equals":"1"}]`, DropTargetAfterChecks: true, AllowOverwriteSource: true}},
		"migrate, every setting": {Command: contract.CommandMigrate, Step: contract.StepCutover, Database: db, Storage: *s3p, Artifact: "x",
			Migration: &MigrationSpec{ID: "ns/m", UID: "u", Mode: "Full", Verify: "Checksum", Parallel: 4, AllowNonEmptyTarget: true,
				Objects: &Objects{Include: []string{"a.*"}}, SourceReadOnly: ptr.To(true), WritersStopped: ptr.To(false),
				MaxRetainedWALBytes: ptr.To[int64](1 << 30), Target: db}},
		"migrate, target only": {Command: contract.CommandMigrate, Step: contract.StepImport, Engine: cairnv1.PostgresEngine, Storage: pvc,
			Migration: &MigrationSpec{ID: "ns/m", UID: "u", Mode: "Full", Verify: "None", Parallel: 1, Target: db}},
	}
	for name, s := range roles {
		t.Run(name, func(t *testing.T) {
			for _, p := range ContractProblems(PodTemplate(s)) {
				t.Error(p)
			}
		})
	}
}

// The check itself fails on what the agent would not parse.
func TestContractProblems(t *testing.T) {
	tpl := PodTemplate(spec(pvc))
	tpl.Spec.Containers[0].Env = append(tpl.Spec.Containers[0].Env, tpl.Spec.Containers[0].Env[0])
	tpl.Spec.Containers[0].Env = append(tpl.Spec.Containers[0].Env, corev1.EnvVar{Name: "CAIRN_NOT_PARSED", Value: "x"}, corev1.EnvVar{Name: contract.EnvMigration, Value: "ns/m"})
	if got := ContractProblems(tpl); len(got) != 3 {
		t.Fatalf("problems %q, want 3 (a duplicate, an unknown variable, a migrate variable in a backup)", got)
	}
	tpl.Spec.Containers[0].Args = []string{contract.CommandMigrate, "no-such-step"}
	if got := ContractProblems(tpl); len(got) == 0 {
		t.Fatal("an unknown step passed")
	}
}
