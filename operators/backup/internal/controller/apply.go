package controller

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

// The operator caches its CronJobs as metadata only (no pod template); the
// Applier's metadata-only mode tells from two annotations that a CronJob
// still matches what it would render (libs/ownership).
const (
	// annotationPrefix names the two annotations.
	annotationPrefix = "backup.cairn.dev"
	// SpecHashAnnotation holds a hash of the desired CronJob.
	SpecHashAnnotation = annotationPrefix + "/spec-hash"
	// SpecGenerationAnnotation holds the CronJob's metadata.generation at
	// which its spec last matched that hash: an edit of the spec by anyone
	// else makes the two differ, and the operator then reads the whole
	// CronJob and reverts the edit.
	SpecGenerationAnnotation = annotationPrefix + "/spec-generation"
)

var cronJobGVK = batchv1.SchemeGroupVersion.WithKind("CronJob")

// cronJobMeta is an empty metadata-only CronJob, for reads from the cache.
func cronJobMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(cronJobGVK)
	return m
}

// ensureCronJob is the step that keeps the one CronJob: created when
// missing, left alone when its metadata shows it unchanged, drift reverted.
// A CronJob of the same name that another controller owns stalls the
// BackupJob: it is never adopted or changed. It is suspended while a run's
// unsupported server holds (status.unsupportedServer, checkUnsupported).
func (r *BackupJobReconciler) ensureCronJob(ctx context.Context, p *pass) error {
	bj := p.Obj
	op, err := r.applyCronJob(ctx, bj, bj.Spec.Suspend || bj.Status.UnsupportedServer != nil)
	var nc *ownership.NotControlledError
	if errors.As(err, &nc) {
		bj.Status.Phase = backupv1.PhasePending
		return reconcile.Stalled(cairnv1.NotControlledReason, "%s", nc.Error())
	}
	if err != nil {
		return fmt.Errorf("ensuring the CronJob: %w", err)
	}
	if op != ownership.Unchanged {
		ctrl.LoggerFrom(ctx).Info("CronJob "+string(op), "CronJob", bj.Name)
	}
	return nil
}

// suspendCronJob suspends bj's CronJob if it exists (a reference it needs is
// missing): no run starts until the BackupJob is reconciled again.
func (r *BackupJobReconciler) suspendCronJob(ctx context.Context, bj *backupv1.BackupJob) error {
	cached := cronJobMeta()
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name}, cached)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(cached, bj)) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = r.applyCronJob(ctx, bj, true)
	return err
}

func (r *BackupJobReconciler) applyCronJob(ctx context.Context, bj *backupv1.BackupJob, suspend bool) (ownership.Op, error) {
	desired := desiredCronJob(bj, r.imageFor(bj))
	desired.Spec.Suspend = &suspend
	return r.cronJobs.Ensure(ctx, bj, desired)
}
