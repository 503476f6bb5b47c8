// Package agentjob renders the Job and Pod specs that run the Cairn agent
// (backup, restore, delete), and reads a finished Job's outcome and the
// agent's result from its Pods' termination messages. Every operator that runs
// the agent uses it, so every agent pod meets the restricted Pod Security
// profile the same way and gets credentials the same way: from Secret
// references, as environment variables, never in arguments.
package agentjob

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/result"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/references"
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

// Spec says what one agent run does.
type Spec struct {
	// Command is the agent command: backup, restore, delete or prune.
	Command string
	// Image of the agent.
	Image string
	// CatalogKey is the BackupJob "namespace/name" whose catalog the run uses.
	CatalogKey string
	// Database to dump from or restore into (nil for delete/prune).
	Database *cairnv1.DatabaseRef
	// Storage holding the artifacts.
	Storage cairnv1.StorageSpec
	// RetentionDays for backup (prune after success) and prune; 0 = none.
	RetentionDays int32
	// Artifact to restore; empty = newest successful in the catalog.
	Artifact string
	// Labels on the pods (and on the Job by the caller).
	Labels map[string]string
	// BackoffLimit and ActiveDeadlineSeconds of the Job.
	BackoffLimit          *int32
	ActiveDeadlineSeconds *int64
}

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
//     fix: an invalid configuration (result.ExitUsage, 2) or a corrupted
//     artifact (result.ExitCorrupted, 3). The Job fails at once, with reason
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
				Values:        []int32{result.ExitUsage, result.ExitCorrupted}, // ascending, as the API requires
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
		{Name: "CAIRN_BACKUPJOB", Value: s.CatalogKey},
		{Name: "CAIRN_LOG_FORMAT", Value: "json"},
	}
	if s.RetentionDays > 0 {
		env = append(env, corev1.EnvVar{Name: "CAIRN_RETENTION_DAYS", Value: strconv.Itoa(int(s.RetentionDays))})
	}
	if s.Artifact != "" {
		env = append(env, corev1.EnvVar{Name: "CAIRN_ARTIFACT", Value: s.Artifact})
	}
	if db := s.Database; db != nil {
		env = append(env,
			corev1.EnvVar{Name: "CAIRN_ENGINE", Value: string(db.Engine)},
			corev1.EnvVar{Name: "CAIRN_DB_HOST", Value: db.Host},
			corev1.EnvVar{Name: "CAIRN_DB_NAME", Value: db.Database},
			secretEnv("CAIRN_DB_USER", db.CredentialsSecretRef.Name, DatabaseUsernameKey),
			secretEnv("CAIRN_DB_PASSWORD", db.CredentialsSecretRef.Name, DatabasePasswordKey),
		)
		if db.Port != 0 {
			env = append(env, corev1.EnvVar{Name: "CAIRN_DB_PORT", Value: strconv.Itoa(int(db.Port))})
		}
	}
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	volumes := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	switch {
	case s.Storage.PVC != nil:
		env = append(env, corev1.EnvVar{Name: "CAIRN_STORE", Value: "pvc"}, corev1.EnvVar{Name: "CAIRN_PVC_PATH", Value: StoreMountPath})
		mounts = append(mounts, corev1.VolumeMount{Name: "store", MountPath: StoreMountPath, SubPath: s.Storage.PVC.SubPath})
		volumes = append(volumes, corev1.Volume{Name: "store", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: s.Storage.PVC.ClaimName},
		}})
	case s.Storage.S3 != nil:
		s3 := s.Storage.S3
		env = append(env,
			corev1.EnvVar{Name: "CAIRN_STORE", Value: "s3"},
			corev1.EnvVar{Name: "CAIRN_S3_ENDPOINT", Value: s3.Endpoint},
			corev1.EnvVar{Name: "CAIRN_S3_BUCKET", Value: s3.Bucket},
			corev1.EnvVar{Name: "CAIRN_S3_PREFIX", Value: s3.Prefix},
			corev1.EnvVar{Name: "CAIRN_S3_REGION", Value: s3.Region},
			corev1.EnvVar{Name: "CAIRN_S3_INSECURE", Value: strconv.FormatBool(s3.Insecure)},
			secretEnv("AWS_ACCESS_KEY_ID", s3.CredentialsSecretRef.Name, S3AccessKeyIDKey),
			secretEnv("AWS_SECRET_ACCESS_KEY", s3.CredentialsSecretRef.Name, S3SecretAccessKeyKey),
		)
		if s3.PartSizeMiB != nil {
			env = append(env, corev1.EnvVar{Name: "CAIRN_S3_PART_SIZE_MIB", Value: strconv.Itoa(int(*s3.PartSizeMiB))})
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: s.Labels},
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
				Name:  ContainerName,
				Image: s.Image,
				Args:  []string{s.Command},
				Env:   env,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(DefaultMemoryLimitMiB<<20, resource.BinarySI)},
				},
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

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

// ReasonPodFailurePolicy is the reason of the Failed condition of a Job that
// its PodFailurePolicy failed: the agent exited with result.ExitUsage or
// result.ExitCorrupted, and its remaining retries were not used.
const ReasonPodFailurePolicy = batchv1.JobReasonPodFailurePolicy

// Outcome of a Job.
type Outcome struct {
	// Finished is true once the Job is Complete or Failed.
	Finished bool
	// Succeeded is true when it is Complete.
	Succeeded bool
	// At is when it finished (the condition's transition time).
	At time.Time
	// Reason and Message of the Failed condition, as the Job controller set
	// them: BackoffLimitExceeded (every retry failed), DeadlineExceeded, or
	// PodFailurePolicy (ReasonPodFailurePolicy: the agent reported a failure
	// retrying cannot fix; Message names the container, pod and exit code).
	Reason, Message string
	// NotRetried is true when the Job failed by its PodFailurePolicy, before
	// using its retries (Reason is ReasonPodFailurePolicy).
	NotRetried bool
}

// JobOutcome reads a Job's terminal condition.
func JobOutcome(job *batchv1.Job) Outcome {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Outcome{Finished: true, Succeeded: true, At: c.LastTransitionTime.Time}
		case batchv1.JobFailed:
			return Outcome{Finished: true, At: c.LastTransitionTime.Time, Reason: c.Reason, Message: c.Message,
				NotRetried: c.Reason == ReasonPodFailurePolicy}
		}
	}
	return Outcome{}
}

// PodResult finds the agent's result in the termination messages of a Job's
// pods: the newest successful result, else the newest failure reason.
func PodResult(pods []corev1.Pod) (*result.Result, string, error) {
	r, failure, err := NewestResult(pods, result.Parse)
	if failure != nil {
		return r, failure.Error(), err
	}
	return r, "", err
}

// NewestResult scans the agent container's termination messages in pods with
// parse (result.Parse, result.ParseMigration, ...): it returns the newest
// message parse accepts, else the error of the newest one it rejected from a
// container that exited non-zero (retries run one pod after another).
func NewestResult[T any](pods []corev1.Pod, parse func(string) (*T, error)) (*T, error, error) {
	var newest *T
	var failure error
	var newestAt, failureAt time.Time
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			term := cs.State.Terminated
			if cs.Name != ContainerName || term == nil || term.Message == "" {
				continue
			}
			r, err := parse(term.Message)
			if err != nil {
				if term.ExitCode != 0 && (failure == nil || term.FinishedAt.After(failureAt)) {
					failure, failureAt = err, term.FinishedAt.Time
				}
				continue
			}
			if newest == nil || term.FinishedAt.After(newestAt) {
				newest, newestAt = r, term.FinishedAt.Time
			}
		}
	}
	if newest == nil && failure == nil {
		return nil, nil, fmt.Errorf("no agent result in %d pod(s)", len(pods))
	}
	return newest, failure, nil
}

// Artifact converts an agent result to the API's artifact reference.
func Artifact(r *result.Result) *cairnv1.Artifact {
	if r == nil {
		return nil
	}
	return &cairnv1.Artifact{Path: r.Artifact, Size: r.Size, Checksum: r.Checksum}
}

// References are the objects an agent run of db (nil for none) against
// storage needs before it can start in namespace: the database credentials
// Secret with its username and password keys, the PVC, the S3 credentials
// Secret with its key pair. field is the spec path of db's parent
// (e.g. "spec" or "spec.target").
func References(namespace string, db *cairnv1.DatabaseRef, dbField string, storage cairnv1.StorageSpec, storageField string) []references.Ref {
	var refs []references.Ref
	if db != nil {
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: db.CredentialsSecretRef.Name,
			Keys: []string{DatabaseUsernameKey, DatabasePasswordKey}, Field: dbField + ".credentialsSecretRef"})
	}
	switch {
	case storage.PVC != nil:
		refs = append(refs, references.Ref{Kind: references.PVC, Namespace: namespace, Name: storage.PVC.ClaimName, Field: storageField + ".pvc.claimName"})
	case storage.S3 != nil:
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: storage.S3.CredentialsSecretRef.Name,
			Keys: []string{S3AccessKeyIDKey, S3SecretAccessKeyKey}, Field: storageField + ".s3.credentialsSecretRef"})
	}
	return refs
}
