package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/names"
	"cairn.dev/libs/ownership"
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
	if id == "" || (bj.Status.Catalog != nil && bj.Status.Catalog.Request == id) {
		return nil
	}
	job := listJob(bj, r.AgentImage, id)
	cur := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := ownership.SetController(bj, job, r.Scheme); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating catalog listing Job %s: %w", job.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("catalog listing Job created", "Job", job.Name, "request", id)
		return nil
	case err != nil:
		return err
	}
	o := agentjob.JobOutcome(cur)
	if !o.Finished {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(cur.Namespace), client.MatchingLabels{jobNameLabel: cur.Name}); err != nil {
		return err
	}
	listing := &backupv1.CatalogListing{Request: id, Time: &metav1.Time{Time: o.At}}
	rep, failure, rerr := agentjob.NewestResult(pods.Items, contract.ParseCatalog)
	switch {
	case rep != nil && o.Succeeded:
		listing.Count = int32(rep.Count)
		for _, a := range rep.Artifacts {
			listing.Artifacts = append(listing.Artifacts, backupv1.CatalogArtifact{Path: a.Path, Size: a.Size, Checksum: a.Checksum,
				Time: &metav1.Time{Time: a.End}, Engine: a.Engine, Tables: int32(a.Tables), Rows: a.Rows, EncryptedTo: a.EncryptedTo})
			if len(listing.Artifacts) == 64 { // the API's maximum
				break
			}
		}
	case failure != nil:
		listing.Message = failure.Error()
	case rerr != nil && r.now().Sub(o.At) < r.ResultGrace:
		p.RequeueAfter(time.Second) // the pod's report has not reached the cache yet
		return nil
	default:
		listing.Message = fmt.Sprintf("the listing Job %s failed: %s %s", cur.Name, o.Reason, o.Message)
	}
	bj.Status.Catalog = listing
	if err := r.Client.Delete(ctx, cur, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return err
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
