package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	backupv1 "cairn.dev/apis/backup/v1"
)

// CredentialsFinalizer is the backup operator's finalizer on the S3
// credentials Secret of a BackupJob with deletionPolicy Delete. When the
// BackupJob's namespace is deleted, the namespace controller deletes the
// Secret in the same sweep as the BackupJob; the finalizer keeps it (and its
// keys) until the artifacts are deleted, so the delete can still run — in
// the operator's namespace, since a namespace being deleted refuses new Jobs
// (deleteElsewhere). The operator adds and removes this finalizer and
// changes nothing else of a tenant's Secret: the ValidatingAdmissionPolicy
// cairn-backup-secret-writes refuses any other write (docs/security.md).
const CredentialsFinalizer = "backup.cairn.dev/artifact-delete"

// protectedSecret is the Secret bj's artifact delete needs after its
// namespace is gone: the S3 credentials of a Delete-policy BackupJob ("" for
// none: Retain, or a PVC store, which no pod can mount once its namespace
// is being deleted).
func protectedSecret(bj *backupv1.BackupJob) string {
	if bj.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete || bj.Spec.Storage.S3 == nil {
		return ""
	}
	return bj.Spec.Storage.S3.CredentialsSecretRef.Name
}

// protectCredentials (a step, after the references were approved and found)
// puts CredentialsFinalizer on the S3 credentials Secret of a Delete-policy
// BackupJob. A pass that finds it there writes nothing. It is removed by
// the credentials controller when no BackupJob needs the Secret any more.
func (r *BackupJobReconciler) protectCredentials(ctx context.Context, p *pass) error {
	name := protectedSecret(p.Obj)
	if name == "" {
		return nil
	}
	return setSecretFinalizer(ctx, r.Client, types.NamespacedName{Namespace: p.Obj.Namespace, Name: name}, true)
}

func secretMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// setSecretFinalizer adds (want) or removes CredentialsFinalizer, a
// metadata merge patch with the optimistic lock, read from the metadata
// cache. A Secret being deleted gets no new finalizer (the API refuses it).
func setSecretFinalizer(ctx context.Context, c client.Client, key types.NamespacedName, want bool) error {
	sec := secretMeta()
	if err := c.Get(ctx, key, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if controllerutil.ContainsFinalizer(sec, CredentialsFinalizer) == want || (want && !sec.DeletionTimestamp.IsZero()) {
		return nil
	}
	orig := sec.DeepCopy()
	if want {
		controllerutil.AddFinalizer(sec, CredentialsFinalizer)
	} else {
		controllerutil.RemoveFinalizer(sec, CredentialsFinalizer)
	}
	return client.IgnoreNotFound(c.Patch(ctx, sec, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

// credentialsReleaser removes CredentialsFinalizer from a Secret no
// BackupJob needs any more: none of its namespace names it as the S3
// credentials of a Delete-policy BackupJob that is live or still cleaning
// up. It is keyed by Secret and woken by the Secret's and the BackupJobs'
// changes, so a BackupJob that switched to Retain, moved to another Secret
// or went away never leaves a Secret stuck Terminating.
type credentialsReleaser struct {
	client client.Client
}

func (c *credentialsReleaser) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sec := secretMeta()
	if err := c.client.Get(ctx, req.NamespacedName, sec); err != nil || !controllerutil.ContainsFinalizer(sec, CredentialsFinalizer) {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	list := &backupv1.BackupJobList{}
	if err := c.client.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	for i := range list.Items {
		bj := &list.Items[i]
		if protectedSecret(bj) == req.Name && (bj.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(bj, backupv1.CleanupFinalizer)) {
			return ctrl.Result{}, nil
		}
	}
	ctrl.LoggerFrom(ctx).Info("no BackupJob needs the Secret for an artifact delete any more; releasing it", "finalizer", CredentialsFinalizer)
	return ctrl.Result{}, setSecretFinalizer(ctx, c.client, req.NamespacedName, false)
}

// setupCredentialsReleaser registers the credentials controller: Secrets
// (metadata only, the cache the BackupJob controller already holds) that
// carry CredentialsFinalizer, and every BackupJob change mapped to the S3
// credentials Secret it names before and after the change.
func setupCredentialsReleaser(mgr ctrl.Manager, c client.Client, opts controller.Options) error {
	held := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return controllerutil.ContainsFinalizer(o, CredentialsFinalizer)
	})
	enqueue := func(q workqueue.TypedRateLimitingInterface[crreconcile.Request], o client.Object) {
		if bj, ok := o.(*backupv1.BackupJob); ok && bj.Spec.Storage.S3 != nil {
			q.Add(crreconcile.Request{NamespacedName: types.NamespacedName{Namespace: bj.Namespace, Name: bj.Spec.Storage.S3.CredentialsSecretRef.Name}})
		}
	}
	backupJobs := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.ObjectOld)
			enqueue(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[crreconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("backupjob-credentials").
		WithOptions(opts).
		For(&corev1.Secret{}, builder.OnlyMetadata, builder.WithPredicates(held)).
		Watches(&backupv1.BackupJob{}, backupJobs).
		Complete(&credentialsReleaser{client: c})
}
