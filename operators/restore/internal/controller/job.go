package controller

import (
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
)

// Labels on every Job and Pod the operator creates. The operator's cache
// holds only objects with ManagedByLabel=ManagedByValue.
const (
	ManagedByLabel = agentjob.ManagedByLabel
	ManagedByValue = "cairn-restore-operator"
	NameLabel      = "app.kubernetes.io/name"
	NameValue      = "cairn-agent"
	ComponentLabel = "app.kubernetes.io/component"
	ComponentValue = "restore"
)

// jobLabels are the labels of rj's Job and its pods.
func jobLabels(rj *restorev1.RestoreJob) map[string]string {
	return map[string]string{
		ManagedByLabel:            ManagedByValue,
		NameLabel:                 NameValue,
		ComponentLabel:            ComponentValue,
		restorev1.RestoreJobLabel: rj.Name,
	}
}

// source is a resolved source: everything the restore Job needs to find the artifact.
type source struct {
	// Storage holds the artifact.
	Storage cairnv1.StorageSpec
	// CatalogKey is the "namespace/name" the artifact was written under.
	CatalogKey string
	// Artifact to restore, passed to the agent explicitly.
	Artifact cairnv1.Artifact
	// PointInTime: restore to this time (the agent chooses the base);
	// Artifact is then empty.
	PointInTime string
}

// desiredJob renders rj's restore Job. spec is rj's spec with defaults applied.
func desiredJob(rj *restorev1.RestoreJob, spec *restorev1.RestoreJobSpec, src source, image string) *batchv1.Job {
	lbls := jobLabels(rj)
	target := spec.Target
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: rj.Namespace,
			Name:      rj.JobName(),
			Labels:    lbls,
		},
		Spec: agentjob.JobSpec(agentjob.Spec{
			Command:               contract.CommandRestore,
			Image:                 image,
			CatalogKey:            src.CatalogKey,
			Database:              &target,
			Storage:               src.Storage,
			Artifact:              src.Artifact.Path,
			Restore:               restoreSpec(spec),
			PodFinalizers:         podFinalizers(spec),
			Encryption:            agentjob.RestoreEncryption(spec.Encryption),
			Parallelism:           ptr.Deref(spec.Parallelism, 0),
			PointInTime:           pointInTime(src),
			Resources:             temporaryServerResources(target, src),
			Labels:                lbls,
			BackoffLimit:          spec.MaxRetries,
			ActiveDeadlineSeconds: spec.ActiveDeadlineSeconds,
		}),
	}
	return job
}

// temporaryServerMemory is the agent container's memory limit when the
// restore recovers a PostgreSQL physical base in a temporary server inside
// the pod (docs/pitr.md): its 64 MB of shared buffers, its processes and
// the dump piped out of it, beside the agent.
var temporaryServerMemory = resource.MustParse("1Gi")

// temporaryServerResources are the resources of a restore that runs a
// temporary PostgreSQL server (a point-in-time restore, or a physical base
// "….pgbase.tar…" restored as it is); nil (the defaults) otherwise. The
// cluster's files unpack into the pod's /tmp (an emptyDir on the node's
// disk).
func temporaryServerResources(target cairnv1.DatabaseRef, src source) *corev1.ResourceRequirements {
	if target.Engine != cairnv1.PostgresEngine || (src.PointInTime == "" && !strings.Contains(src.Artifact.Path, ".pgbase.tar")) {
		return nil
	}
	return &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: temporaryServerMemory},
	}
}

// restoreSpec passes spec.checks, spec.dropTargetAfterChecks and
// spec.allowOverwriteSource to the agent; the agent reports the checks'
// results and what it did to the target in its result (contract.Result).
func restoreSpec(spec *restorev1.RestoreJobSpec) *agentjob.RestoreSpec {
	rs := &agentjob.RestoreSpec{DropTargetAfterChecks: spec.DropTargetAfterChecks, AllowOverwriteSource: spec.AllowOverwriteSource,
		RecordVerification: spec.RecordVerification}
	if len(spec.Checks) > 0 {
		if b, err := json.Marshal(spec.Checks); err == nil {
			rs.ChecksJSON = string(b)
		}
	}
	return rs
}

// jobArtifact is the artifact a restore Job was given, read from its agent
// container's environment.
func jobArtifact(job *batchv1.Job) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name != agentjob.ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == contract.EnvArtifact {
				return e.Value
			}
		}
	}
	return ""
}

// describeSource is the one-line summary shown in the Source column.
func describeSource(rj *restorev1.RestoreJob) string {
	switch src := rj.Spec.Source; {
	case src.BackupJob != nil:
		return "backupjob/" + src.BackupJob.Name
	case src.Store != nil:
		return describeStorage(src.Store.Storage) + " " + src.Store.BackupJob
	}
	return ""
}

func describeStorage(st cairnv1.StorageSpec) string {
	switch {
	case st.S3 != nil:
		s := "s3://" + st.S3.Bucket
		if st.S3.Prefix != "" {
			s += "/" + st.S3.Prefix
		}
		return s
	case st.PVC != nil:
		s := "pvc/" + st.PVC.ClaimName
		if st.PVC.SubPath != "" {
			s += "/" + st.PVC.SubPath
		}
		return s
	}
	return "?"
}

// describeTarget names a database for messages: "postgres db.shop.svc:5432/orders".
func describeTarget(db cairnv1.DatabaseRef) string {
	return fmt.Sprintf("%s %s:%d/%s", db.Engine, db.Host, db.Port, db.Database)
}

// DesiredJob is the Job the operator creates for rj when its source is
// BackupJob bj (in rj's namespace): bj's newest artifact, or the one rj
// names. Without its controller reference (the caller sets it). The
// benchmark's floor writes exactly this Job (operators/restore/internal/bench).
func DesiredJob(rj *restorev1.RestoreJob, bj *backupv1.BackupJob, image string) *batchv1.Job {
	spec := rj.Spec.DeepCopy()
	spec.SetDefaults()
	src := source{Storage: bj.Spec.Storage, CatalogKey: bj.Namespace + "/" + bj.Name}
	switch {
	case spec.Source.BackupJob != nil && spec.Source.BackupJob.Artifact != "":
		src.Artifact = cairnv1.Artifact{Path: spec.Source.BackupJob.Artifact}
	case bj.Status.LastArtifact != nil:
		src.Artifact = *bj.Status.LastArtifact
	}
	return desiredJob(rj, spec, src, image)
}

// pointInTime is a point-in-time restore's target (nil otherwise).
func pointInTime(src source) *agentjob.PointInTime {
	if src.PointInTime == "" {
		return nil
	}
	return &agentjob.PointInTime{RecoveryTarget: src.PointInTime}
}
