package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/hold"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/remote"
)

// KubeconfigFinalizer is the migration operator's finalizer on the
// kubeconfig Secret of a MigrationJob whose target-side Jobs run in another
// cluster (issue 30). Owner references cannot cross clusters: those Jobs
// are deleted by the MigrationJob's finalizer, through that Secret. When
// the MigrationJob's namespace is deleted, the namespace controller deletes
// the Secret in the same sweep; this finalizer keeps it until the
// MigrationJob's cleanup is over, and is removed as soon as no MigrationJob
// of the namespace needs the Secret (libs/hold). The operator adds and
// removes it and changes nothing else of such a Secret: the
// ValidatingAdmissionPolicy cairn-migration-secret-switch refuses any other
// write (docs/security.md).
const KubeconfigFinalizer = "migration.cairn.dev/remote-cleanup"

// kubeconfigNeeded is the Secret mj's cleanup needs to reach the target
// cluster: its kubeconfig Secret when target-side Jobs run there.
func kubeconfigNeeded(o client.Object) []string {
	mj, ok := o.(*migrationv1.MigrationJob)
	if !ok {
		return nil
	}
	spec := mj.Spec.DeepCopy()
	spec.SetDefaults()
	if !runsRemote(spec) {
		return nil
	}
	return []string{spec.Target.KubeconfigSecretRef.Name}
}

// holdKubeconfig (a step, after check approved the references) puts
// KubeconfigFinalizer on the kubeconfig Secret of a MigrationJob whose
// target-side Jobs run in another cluster. A pass that finds it there
// writes nothing.
func (r *MigrationJobReconciler) holdKubeconfig(ctx context.Context, p *pass) error {
	return r.kubeconfigs.Ensure(ctx, r.Client, p.Obj)
}

// kubeconfigHold is the hold on kubeconfig Secrets: held while a
// MigrationJob that needs one exists (kubeconfigNeeded).
func kubeconfigHold() *hold.Hold {
	return &hold.Hold{Finalizer: KubeconfigFinalizer, Kind: corev1.SchemeGroupVersion.WithKind("Secret"),
		Owner: &migrationv1.MigrationJob{}, Owners: &migrationv1.MigrationJobList{}, Cleanup: migrationv1.CleanupFinalizer,
		Needs: kubeconfigNeeded}
}

// deleteRemote deletes mj's Jobs (and so their pods) in the target
// cluster, through the kubeconfig Secret (kept by KubeconfigFinalizer while
// mj's namespace is being deleted); true when none is left. Nothing to do
// when no step ran there.
func (r *MigrationJobReconciler) deleteRemote(ctx context.Context, mj *migrationv1.MigrationJob) (bool, error) {
	spec := mj.Spec.DeepCopy()
	spec.SetDefaults()
	if !runsRemote(spec) || !ranRemote(mj) {
		return true, nil
	}
	ref := spec.Target.KubeconfigSecretRef
	c, err := r.Remote.Get(ctx, remote.SecretRef{Namespace: mj.Namespace, Name: ref.Name, Key: ref.Key})
	if err != nil {
		return false, fmt.Errorf("target cluster: %w", err)
	}
	gone, err := ownership.DeleteChildren(ctx, c, mj, ownership.Children{
		Kinds: []client.ObjectList{&batchv1.JobList{}}, Labels: map[string]string{migrationv1.MigrationJobUIDLabel: string(mj.UID)},
		Namespace: targetNamespace(mj),
	})
	if err != nil {
		return false, fmt.Errorf("target cluster: %w", err)
	}
	return gone, nil
}
