package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/reconcile"
)

// A run that fails with the agent's failure code UnsupportedServerVersion
// (exit code 4: no tool of its image can serve the database server; the
// Job's podFailurePolicy fails it at once) is permanent for that spec and
// that image. The BackupJob records it (status.unsupportedServer: the
// image, the generation, the agent's message), is Stalled with reason
// UnsupportedServerVersion, and its CronJob is suspended, so the schedule
// does not start a run that must fail the same way. It runs again when
// the spec changes (a new generation), when the operator's agent image is
// not the one recorded (--agent-image changed), or on a new run-now
// request (a person asking to try again, e.g. after the server changed).

// recordUnsupported notes in bj's status a run that failed because its
// image cannot serve the server, or clears the note for any other run.
func (r *BackupJobReconciler) recordUnsupported(bj *backupv1.BackupJob, job *batchv1.Job, f *contract.FailedError) {
	if f == nil || f.Code != contract.CodeUnsupportedServer {
		bj.Status.UnsupportedServer = nil
		return
	}
	msg := f.Reason
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	bj.Status.UnsupportedServer = &backupv1.UnsupportedServerStatus{
		Image: r.runImage(job), Generation: bj.Generation, Run: job.Name, Message: msg,
	}
}

// AgentImageAnnotation names the agent image on every backup run's Job
// (the CronJob's job template and run-now Jobs): the operator caches Jobs
// without their spec (agentjob.TransformRun), and reads a finished run's
// image from it.
const AgentImageAnnotation = annotationPrefix + "/agent-image"

// runImage is the agent image job ran: its annotation, else (a Job made
// before the annotation) the operator's.
func (r *BackupJobReconciler) runImage(job *batchv1.Job) string {
	if img := job.Annotations[AgentImageAnnotation]; img != "" {
		return img
	}
	return r.AgentImage
}

// checkUnsupported is the step before the CronJob: a recorded unsupported
// server that no longer holds (a new generation, another agent image, a
// new run-now request) is cleared. One that holds keeps the CronJob
// suspended (ensureCronJob) and ends the pass Stalled after the runs step
// has recorded any run that finished meanwhile (observeRuns).
func (r *BackupJobReconciler) checkUnsupported(_ context.Context, p *pass) error {
	r.clearStaleUnsupported(p.Obj)
	return nil
}

// clearStaleUnsupported clears bj's recorded unsupported server when it no
// longer holds: the spec changed since (generation), the image the
// operator would run now (imageFor) is not the run's, or a run-now request
// is pending.
func (r *BackupJobReconciler) clearStaleUnsupported(bj *backupv1.BackupJob) {
	u := bj.Status.UnsupportedServer
	if u == nil {
		return
	}
	runNow := bj.Annotations[backupv1.RunNowAnnotation]
	if u.Generation != bj.Generation || u.Image != r.imageFor(bj) || (runNow != "" && runNow != bj.Status.LastRunNowRequest) {
		bj.Status.UnsupportedServer = nil
	}
}

// stallUnsupported suspends bj's CronJob and ends the pass Stalled with
// the agent's message.
func (r *BackupJobReconciler) stallUnsupported(ctx context.Context, bj *backupv1.BackupJob) error {
	u := bj.Status.UnsupportedServer
	bj.Status.Phase = backupv1.PhaseFailed
	bj.Status.NextScheduleTime = nil
	if err := r.suspendCronJob(ctx, bj); err != nil {
		return err
	}
	return reconcile.Stalled(cairnv1.UnsupportedServerVersionReason,
		"backup run %s: %s; no run starts (the CronJob is suspended) until the spec or the operator's agent image (%s) changes, or a new run-now request",
		u.Run, u.Message, u.Image)
}

// runServer is the database server a finished run reported: in its result,
// or in its failure (an unsupported server); nil when it reported none.
func runServer(res *contract.Result, f *contract.FailedError) *cairnv1.ServerInfo {
	var s *contract.ServerInfo
	switch {
	case res != nil && res.Server != nil:
		s = res.Server
	case f != nil && f.Server != nil:
		s = f.Server
	default:
		return nil
	}
	return &cairnv1.ServerInfo{Engine: s.Engine, Version: s.Version}
}

// imageFor is the agent image of bj's backup runs: the one --agent-images
// maps bj's server (status.server) to, else --agent-image.
func (r *BackupJobReconciler) imageFor(bj *backupv1.BackupJob) string {
	return r.Images.For(bj.Status.Server, r.AgentImage)
}

// rerunWithServingImage: a run refused its server (just recorded) on an
// image other than the one the operator now chooses for that server (an
// --agent-images entry serves it) runs again at once with that image, as a
// Job named after the refused run (so it starts once), and the CronJob
// takes the image: the BackupJob does not stall. Nothing when the choice
// is the refused image (then it stalls).
func (r *BackupJobReconciler) rerunWithServingImage(ctx context.Context, p *pass) error {
	bj := p.Obj
	u := bj.Status.UnsupportedServer
	if u == nil || u.Generation != bj.Generation || p.State.active {
		return nil
	}
	img := r.imageFor(bj)
	if img == u.Image {
		return nil
	}
	if _, err := r.applyCronJob(ctx, bj, bj.Spec.Suspend); err != nil {
		return fmt.Errorf("ensuring the CronJob: %w", err)
	}
	if !bj.Spec.Suspend {
		job := runNowJob(bj, img, "rerun-"+u.Run)
		if _, err := ownRun(r, bj, job, contract.Parse).Observe(ctx); err != nil {
			return fmt.Errorf("rerun Job %s: %w", job.Name, err)
		}
		p.State.active = true
		ctrl.LoggerFrom(ctx).Info("rerunning with the image that serves the server", "Job", job.Name, "image", img, "refused", u.Run)
	}
	bj.Status.UnsupportedServer = nil
	return nil
}
