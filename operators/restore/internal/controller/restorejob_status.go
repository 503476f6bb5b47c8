package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/result"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/references"
	"cairn.dev/operators/restore/internal/restorespec"
)

// podResult reads the agent's report from the termination messages of the
// Job's pods.
func (r *RestoreJobReconciler) podResult(ctx context.Context, rj *restorev1.RestoreJob, job *batchv1.Job) (*result.Result, string, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{restorev1.RestoreJobLabel: rj.Name}); err != nil {
		return nil, "", fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var mine []corev1.Pod
	for _, pod := range pods.Items {
		if metav1.IsControlledBy(&pod, job) {
			mine = append(mine, pod)
		}
	}
	return agentjob.PodResult(mine)
}

// transition counts a RestoreJob that just reached Succeeded or Failed (the
// skeleton has emitted the transition Event).
func transition(_ context.Context, _ events.EventRecorder, old, rj *restorev1.RestoreJob) {
	if rj.Finished() && !old.Finished() {
		recordFinished(rj)
	}
}

// restoreReferences are the objects a restore of rj needs: the target's
// credentials Secret and the store's PVC or S3 credentials.
func restoreReferences(namespace string, spec *restorev1.RestoreJobSpec, storage cairnv1.StorageSpec) []references.Ref {
	return agentjob.References(namespace, &spec.Target, "spec.target", storage, "spec.source.store.storage")
}

// restoreJobReferences indexes a RestoreJob by the objects it needs (for
// their events to wake it).
func restoreJobReferences(o client.Object) []references.Ref {
	rj, ok := o.(*restorev1.RestoreJob)
	if !ok {
		return nil
	}
	var st cairnv1.StorageSpec
	if rj.Spec.Source.Store != nil {
		st = rj.Spec.Source.Store.Storage
	}
	return restoreReferences(rj.Namespace, &rj.Spec, st)
}

// restoreJobIndex is what a RestoreJob is indexed under: its source
// BackupJob and the objects a restore needs.
func restoreJobIndex(o client.Object) []ownership.Reference {
	rj, ok := o.(*restorev1.RestoreJob)
	if !ok {
		return nil
	}
	refs := references.References(restoreJobReferences(rj))
	if key, ok := restorespec.SourceBackupJob(rj); ok {
		refs = append(refs, ownership.Reference{GroupKind: backupv1.GroupVersion.WithKind("BackupJob").GroupKind(), NamespacedName: key})
	}
	return refs
}
