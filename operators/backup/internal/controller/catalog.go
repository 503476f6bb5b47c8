package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/names"
)

// Bounds of one catalog listing Job: it only reads the store's index.
const (
	listBackoffLimit    int32 = 1
	listDeadlineSeconds int64 = 300
)

// listCatalog answers the list-catalog annotation: one `agent list` Job per
// distinct request id, with the BackupJob's store and credentials (its
// Secret reaches the pod only, as for every run); when it finished, its
// report becomes status.catalog and the Job is deleted. A listing runs
// beside a backup run (it only reads the index).
func (r *BackupJobReconciler) listCatalog(ctx context.Context, p *pass) error {
	bj := p.Obj
	id := bj.Annotations[backupv1.ListCatalogAnnotation]
	if id == "" {
		return nil
	}
	job := listJob(bj, r.AgentImage, id)
	if bj.Status.Catalog != nil && bj.Status.Catalog.Request == id {
		// Answered: its Job goes (a pass that read the BackupJob before the
		// answer was stored may have started it again).
		return r.deleteOwnJob(ctx, bj, job.Name, "catalog listing")
	}
	run := ownRun(r, bj, job, contract.ParseCatalog)
	obs, err := run.Observe(ctx)
	if err != nil {
		return fmt.Errorf("catalog listing Job %s: %w", job.Name, err)
	}
	p.RequeueAfter(obs.RequeueAfter)
	if obs.Created {
		ctrl.LoggerFrom(ctx).Info("catalog listing Job created", "Job", job.Name, "request", id)
	}
	if obs.State != agentjob.RunSucceeded && obs.State != agentjob.RunFailed {
		return nil
	}
	o := obs.Outcome
	listing := &backupv1.CatalogListing{Request: id, Time: &metav1.Time{Time: o.At}}
	switch rep := obs.Result; {
	case rep != nil && o.Succeeded:
		listing.Count = int32(rep.Count)
		for _, a := range rep.Artifacts {
			listing.Artifacts = append(listing.Artifacts, backupv1.CatalogArtifact{Path: a.Path, Size: a.Size, Checksum: a.Checksum,
				Time: &metav1.Time{Time: a.End}, Engine: a.Engine, Tables: int32(a.Tables), Rows: a.Rows, EncryptedTo: a.EncryptedTo})
			if len(listing.Artifacts) == 64 { // the API's maximum
				break
			}
		}
	case obs.Failure != nil:
		listing.Message = "agent failed: " + obs.Failure.Reason
	case o.Succeeded:
		listing.Message = fmt.Sprintf("the listing Job %s succeeded without a report", job.Name)
	default:
		listing.Message = fmt.Sprintf("the listing Job %s failed: %s %s", job.Name, o.Reason, o.Message)
	}
	// The answer is stored before its Job is deleted: a pass that read the
	// BackupJob before it cannot store it again (its write conflicts).
	bj.Status.Catalog = listing
	if err := p.Checkpoint(ctx); err != nil {
		return err
	}
	return r.deleteFinishedJob(ctx, bj, obs.Job, "catalog listing")
}

// deleteOwnJob deletes the Job name of bj's (a catalog listing, an
// archive check) if the cache shows it, controlled by bj: the cleanup a
// later pass repeats. A Job just observed goes by deleteFinishedJob instead (the
// cache may not hold it yet).
func (r *BackupJobReconciler) deleteOwnJob(ctx context.Context, bj *backupv1.BackupJob, name, what string) error {
	cur := &batchv1.Job{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: name}, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	return r.deleteFinishedJob(ctx, bj, cur, what)
}

// deleteFinishedJob deletes job, as read, if bj controls it (background: its pod
// goes after it).
func (r *BackupJobReconciler) deleteFinishedJob(ctx context.Context, bj *backupv1.BackupJob, job *batchv1.Job, what string) error {
	if job == nil || !metav1.IsControlledBy(job, bj) || !job.DeletionTimestamp.IsZero() {
		return nil
	}
	err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s Job %s: %w", what, job.Name, err)
	}
	return nil
}

// listJob renders the Job of one list-catalog request id; its name derives
// from the id, so a repeated reconcile never starts a second one.
func listJob(bj *backupv1.BackupJob, image, id string) *batchv1.Job {
	name, _ := names.Request(bj.Namespace, bj.Name, "list", id)
	spec := runSpec(bj, image, runList)
	spec.Command = "list"
	spec.Database = nil
	spec.RetentionDays = 0
	spec.Retention = nil
	spec.ObjectLock = nil
	spec.Encryption = nil
	spec.BackoffLimit = new(listBackoffLimit)
	spec.ActiveDeadlineSeconds = new(listDeadlineSeconds)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: name, Labels: spec.Labels,
			Annotations: map[string]string{backupv1.ListCatalogAnnotation: id}},
		Spec: agentjob.JobSpec(spec),
	}
}
