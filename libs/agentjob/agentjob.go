// Package agentjob renders the Job and Pod specs that run the Cairn agent
// (backup, restore, delete), and reads a finished Job's outcome and the
// agent's result from its Pods' termination messages. Every operator that runs
// the agent uses it, so every agent pod meets the restricted Pod Security
// profile the same way and gets credentials the same way: from Secret
// references, as environment variables, never in arguments.
package agentjob

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// Secret keys the agent's credentials are read from.
const (
	// DatabaseUsernameKey and DatabasePasswordKey are the keys of a database credentials Secret.
	DatabaseUsernameKey = "username"
	DatabasePasswordKey = "password"
	// S3AccessKeyIDKey and S3SecretAccessKeyKey are the keys of an S3 credentials Secret.
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
)

// ContainerName is the name of the agent container in every pod.
const ContainerName = "agent"

// StoreMountPath is where a PVC store is mounted in the agent container.
const StoreMountPath = "/var/lib/cairn/store"

// RunAsUser is the non-root user the agent runs as (the image's user).
const RunAsUser = 65532

// The agent container's resources in every Job (a MigrationJob's
// spec.resources replaces them for its steps).
const (
	// DefaultMemoryLimitMiB is the agent container's memory limit.
	DefaultMemoryLimitMiB = 256
	// MemoryOverheadMiB is what a run needs beside its S3 part buffer: the
	// agent (Go runtime, zstd window and buffers, HTTP buffers: about 35 MiB
	// measured, docs/benchmarks.md) and the dump or restore tool it runs in
	// the same container (pg_dump, mysqldump, pg_restore, mysql), which
	// count against the same limit.
	MemoryOverheadMiB = 96
)

// MaxPartSizeMiB is the largest S3 part size (storage.s3.partSizeMiB) that
// fits in a memory limit of limitMiB: the agent holds one part in memory.
func MaxPartSizeMiB(limitMiB int64) int64 { return limitMiB - MemoryOverheadMiB }

// Spec says what one agent run does: every role (backup, list, prune,
// delete, restore with checks, every migration step) is rendered from it,
// with nothing added to the Job afterwards.
type Spec struct {
	// Command is the agent command (contract.Command…); Step the migration
	// step (contract.Step…) when Command is migrate.
	Command, Step string
	// Image of the agent.
	Image string
	// CatalogKey is the BackupJob "namespace/name" whose catalog the run
	// uses (a MigrationJob's for a store transfer).
	CatalogKey string
	// Database to dump from, restore into, or migrate from (nil for
	// delete/prune/list, and for a migration step that only reaches the
	// target).
	Database *cairnv1.DatabaseRef
	// Engine is rendered when Database is nil and a step still needs it
	// (a migration step that only reaches the target).
	Engine cairnv1.DatabaseEngine
	// Storage holding the artifacts.
	Storage cairnv1.StorageSpec
	// RetentionDays for backup (prune after success) and prune; 0 = none.
	RetentionDays int32
	// Retention: calendar tiers instead of RetentionDays (set one).
	Retention *Retention
	// ObjectLock: S3 Object Lock for what a backup writes.
	ObjectLock *ObjectLock
	// Artifact to restore (or import/verify in a store transfer); empty =
	// newest successful in the catalog.
	Artifact string
	// Restore: the checks and guards of a restore.
	Restore *RestoreSpec
	// Encryption: the recipients a backup (or export) encrypts to, the
	// identity a restore (or import) decrypts with.
	Encryption *Encryption
	// Migration: the settings of a migration step.
	Migration *MigrationSpec
	// Resources replace the agent container's default resources.
	Resources *corev1.ResourceRequirements
	// PointInTime: a backup that is a base for point-in-time recovery, the
	// archiver's settings, a restore's target time.
	PointInTime *PointInTime
	// Parallelism (contract.EnvParallelism): how many parts a backup writes
	// or a restore loads at once; 0 = for a restore, the container's CPU
	// limit in whole CPUs when it has one, else (and for a backup) not
	// rendered (the agent's default, 1: one stream).
	Parallelism int32
	// Labels on the pods (and on the Job by the caller).
	Labels map[string]string
	// PodFinalizers hold the pods until the operator has read them (a
	// restore's report of its scratch database).
	PodFinalizers []string
	// BackoffLimit and ActiveDeadlineSeconds of the Job.
	BackoffLimit          *int32
	ActiveDeadlineSeconds *int64
}

// RestoreSpec is what a restore does besides restoring (contract.EnvChecks…).
type RestoreSpec struct {
	// ChecksJSON is the checks to run in the target, as JSON (a list of
	// contract.Check); empty = none.
	ChecksJSON string
	// DropTargetAfterChecks: drop the target after the checks, only if the
	// restore created it.
	DropTargetAfterChecks bool
	// AllowOverwriteSource: the restore may replace the database the backup
	// was taken of.
	AllowOverwriteSource bool
	// RecordVerification: record in the store that the artifact restored
	// and every check passed (for retention's minVerified).
	RecordVerification bool
}

// MigrationSpec is a migration step's settings (contract.MigrateVars).
type MigrationSpec struct {
	// ID is the MigrationJob's "namespace/name", UID its UID.
	ID, UID string
	// Mode, Verify: the MigrationJob's spec.mode and spec.verify.
	Mode, Verify string
	// Parallel tables copied and verified at once.
	Parallel int32
	// AllowNonEmptyTarget lets precheck pass with included tables on the target.
	AllowNonEmptyTarget bool
	// Objects: include and exclude patterns, rendered when set.
	Objects *Objects
	// SourceReadOnly, WritersStopped and MaxRetainedWALBytes are rendered
	// when set (the steps that use them).
	SourceReadOnly, WritersStopped *bool
	MaxRetainedWALBytes            *int64
	// Target database, when the step reaches it.
	Target *cairnv1.DatabaseRef
}

// Objects are the include and exclude patterns of a migration.
type Objects struct{ Include, Exclude []string }

// JobSpec renders the Job spec of one run.
func JobSpec(s Spec) batchv1.JobSpec {
	return batchv1.JobSpec{
		BackoffLimit:            s.BackoffLimit,
		ActiveDeadlineSeconds:   s.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: nil,
		PodFailurePolicy:        PodFailurePolicy(),
		Template:                PodTemplate(s),
	}
}

// PodFailurePolicy is the policy of every agent Job (rules are tried in
// order, the first match applies):
//
//   - FailJob when the agent container exits with a code retrying cannot
//     fix: an invalid configuration (contract.ExitUsage, 2), a corrupted
//     artifact (contract.ExitCorrupted, 3), or a database server no tool of
//     the image can serve (contract.ExitUnsupported, 4: failure code
//     UnsupportedServerVersion). The Job fails at once, with reason
//     PodFailurePolicy, instead of using up its backoffLimit on runs that
//     would fail the same way.
//   - Ignore a pod that failed because it was disrupted (condition
//     DisruptionTarget: evicted, preempted, its node drained or gone): it is
//     replaced without counting against backoffLimit.
//
// Any other failure counts against backoffLimit as before. Every field is
// set (no API defaulting), so a rendered spec compares equal to the stored
// one.
func PodFailurePolicy() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To(ContainerName),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        []int32{contract.ExitUsage, contract.ExitCorrupted, contract.ExitUnsupported}, // ascending, as the API requires
			},
		},
		{
			Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
			},
		},
	}}
}

// PodTemplate renders the pod template of one run: restricted Pod Security
// (non-root, no privilege escalation, all capabilities dropped, seccomp
// RuntimeDefault, read-only root filesystem with an emptyDir /tmp).
func PodTemplate(s Spec) corev1.PodTemplateSpec {
	env := []corev1.EnvVar{
		{Name: contract.EnvBackupJob, Value: s.CatalogKey},
		{Name: contract.EnvLogFormat, Value: "json"},
	}
	if s.RetentionDays > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvRetentionDays, Value: strconv.Itoa(int(s.RetentionDays))})
	}
	env = append(env, s.Retention.env()...)
	env = append(env, s.ObjectLock.env()...)
	if s.Artifact != "" {
		env = append(env, corev1.EnvVar{Name: contract.EnvArtifact, Value: s.Artifact})
	}
	if db := s.Database; db != nil {
		env = append(env, corev1.EnvVar{Name: contract.EnvEngine, Value: string(db.Engine)})
		env = append(env, databaseEnv(db, contract.EnvDBHost, contract.EnvDBPort, contract.EnvDBName, contract.EnvDBUser, contract.EnvDBPassword)...)
	} else if s.Engine != "" {
		env = append(env, corev1.EnvVar{Name: contract.EnvEngine, Value: string(s.Engine)})
	}
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	volumes := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	switch {
	case s.Storage.PVC != nil:
		env = append(env, corev1.EnvVar{Name: contract.EnvStore, Value: "pvc"}, corev1.EnvVar{Name: contract.EnvPVCPath, Value: StoreMountPath})
		mounts = append(mounts, corev1.VolumeMount{Name: "store", MountPath: StoreMountPath, SubPath: s.Storage.PVC.SubPath})
		volumes = append(volumes, corev1.Volume{Name: "store", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Storage.PVC.ClaimName},
		}})
	case s.Storage.S3 != nil:
		s3 := s.Storage.S3
		env = append(env,
			corev1.EnvVar{Name: contract.EnvStore, Value: "s3"},
			corev1.EnvVar{Name: contract.EnvS3Endpoint, Value: s3.Endpoint},
			corev1.EnvVar{Name: contract.EnvS3Bucket, Value: s3.Bucket},
			corev1.EnvVar{Name: contract.EnvS3Prefix, Value: s3.Prefix},
			corev1.EnvVar{Name: contract.EnvS3Region, Value: s3.Region},
			corev1.EnvVar{Name: contract.EnvS3Insecure, Value: strconv.FormatBool(s3.Insecure)},
			secretEnv(contract.EnvS3AccessKeyID, s3.CredentialsSecretRef.Name, S3AccessKeyIDKey),
			secretEnv(contract.EnvS3SecretAccessKey, s3.CredentialsSecretRef.Name, S3SecretAccessKeyKey),
		)
		if s3.PartSizeMiB != nil {
			env = append(env, corev1.EnvVar{Name: contract.EnvS3PartSizeMiB, Value: strconv.Itoa(int(*s3.PartSizeMiB))})
		}
	}
	env = append(env, s.Restore.env()...)
	env = append(env, s.Encryption.env()...)
	env = append(env, s.Migration.env()...)
	env = append(env, s.PointInTime.env()...)
	args := []string{s.Command}
	if s.Step != "" {
		args = append(args, s.Step)
	}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(DefaultMemoryLimitMiB<<20, resource.BinarySI)},
	}
	if s.Resources != nil {
		resources = *s.Resources.DeepCopy()
	}
	if p := parallelism(s.Parallelism, s.Command, resources); p > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvParallelism, Value: strconv.Itoa(int(p))})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: s.Labels, Finalizers: s.PodFinalizers},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](RunAsUser),
				RunAsGroup:     ptr.To[int64](RunAsUser),
				FSGroup:        ptr.To[int64](RunAsUser),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:                     ContainerName,
				Image:                    s.Image,
				Args:                     args,
				Env:                      env,
				Resources:                resources,
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				VolumeMounts:             mounts,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					RunAsNonRoot:             ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
			Volumes: volumes,
		},
	}
}

// databaseEnv is a database's address under the given variable names, its
// credentials from its Secret (never a value in the spec).
func databaseEnv(db *cairnv1.DatabaseRef, host, port, name, user, password string) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: host, Value: db.Host},
		{Name: name, Value: db.Database},
		secretEnv(user, db.CredentialsSecretRef.Name, DatabaseUsernameKey),
		secretEnv(password, db.CredentialsSecretRef.Name, DatabasePasswordKey),
	}
	if db.Port != 0 {
		env = append(env, corev1.EnvVar{Name: port, Value: strconv.Itoa(int(db.Port))})
	}
	return env
}

func (r *RestoreSpec) env() []corev1.EnvVar {
	if r == nil {
		return nil
	}
	var env []corev1.EnvVar
	if r.ChecksJSON != "" {
		env = append(env, corev1.EnvVar{Name: contract.EnvChecks, Value: r.ChecksJSON})
	}
	if r.DropTargetAfterChecks {
		env = append(env, corev1.EnvVar{Name: contract.EnvDropTargetAfterChecks, Value: "true"})
	}
	if r.AllowOverwriteSource {
		env = append(env, corev1.EnvVar{Name: contract.EnvAllowOverwriteSource, Value: "true"})
	}
	if r.RecordVerification {
		env = append(env, corev1.EnvVar{Name: contract.EnvRecordVerification, Value: "true"})
	}
	return env
}

func (m *MigrationSpec) env() []corev1.EnvVar {
	if m == nil {
		return nil
	}
	env := []corev1.EnvVar{
		{Name: contract.EnvMigration, Value: m.ID},
		{Name: contract.EnvMigrationUID, Value: m.UID},
		{Name: contract.EnvMode, Value: m.Mode},
		{Name: contract.EnvParallel, Value: strconv.Itoa(int(m.Parallel))},
		{Name: contract.EnvVerify, Value: m.Verify},
		{Name: contract.EnvAllowNonEmptyTarget, Value: strconv.FormatBool(m.AllowNonEmptyTarget)},
	}
	if o := m.Objects; o != nil {
		env = append(env,
			corev1.EnvVar{Name: contract.EnvInclude, Value: strings.Join(o.Include, ",")},
			corev1.EnvVar{Name: contract.EnvExclude, Value: strings.Join(o.Exclude, ",")})
	}
	if m.SourceReadOnly != nil {
		env = append(env, corev1.EnvVar{Name: contract.EnvCutoverSourceReadOnly, Value: strconv.FormatBool(*m.SourceReadOnly)})
	}
	if m.WritersStopped != nil {
		env = append(env, corev1.EnvVar{Name: contract.EnvCutoverWritersStopped, Value: strconv.FormatBool(*m.WritersStopped)})
	}
	if m.MaxRetainedWALBytes != nil {
		env = append(env, corev1.EnvVar{Name: contract.EnvMaxRetainedWALBytes, Value: strconv.FormatInt(*m.MaxRetainedWALBytes, 10)})
	}
	if t := m.Target; t != nil {
		// The target's port is always rendered (0 = the engine's default).
		env = append(env,
			corev1.EnvVar{Name: contract.EnvTargetHost, Value: t.Host},
			corev1.EnvVar{Name: contract.EnvTargetPort, Value: strconv.Itoa(int(t.Port))},
			corev1.EnvVar{Name: contract.EnvTargetName, Value: t.Database},
			secretEnv(contract.EnvTargetUser, t.CredentialsSecretRef.Name, DatabaseUsernameKey),
			secretEnv(contract.EnvTargetPassword, t.CredentialsSecretRef.Name, DatabasePasswordKey),
		)
	}
	return env
}

// parallelism is p, or without it the CPU limit in whole CPUs (1..64), or
// 0 (not rendered) without a CPU limit.
func parallelism(p int32, command string, r corev1.ResourceRequirements) int32 {
	if p > 0 {
		return p
	}
	// A parallel backup holds FLUSH TABLES WITH READ LOCK on the source
	// while its dumps start, and measured slower than one stream
	// (docs/benchmarks.md): only when spec.parallelism asks for it.
	if command == contract.CommandBackup {
		return 0
	}
	if cpu, ok := r.Limits[corev1.ResourceCPU]; ok {
		return int32(min(max(cpu.MilliValue()/1000, 1), 64))
	}
	return 0
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}
