// Package controller reconciles MigrationJobs: for each it runs one agent
// Job per step (`agent migrate <step>`: precheck, copy or export/import,
// verify, cutover, and replication-* in Continuous mode), recording each
// Job's name in status before creating it, and moves the phase along
// Pending → Prechecking → Copying → Verifying → ReadyForCutover →
// CuttingOver → Succeeded | Failed.
//
// Jobs run in the MigrationJob's namespace (owned by it), except, with a
// Store transfer to a target in another cluster, precheck-target, import
// and verify, which run in the target cluster (labelled with the
// MigrationJob's UID; the finalizer deletes them).
package controller

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/hold"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
	"cairn.dev/libs/remote"
)

// +kubebuilder:rbac:groups=migration.cairn.dev,resources=migrationjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=migration.cairn.dev,resources=migrationjobs/status,verbs=patch
// +kubebuilder:rbac:groups=migration.cairn.dev,resources=migrationjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// RBAC: patch on Secrets, which the ValidatingAdmissionPolicy
// cairn-migration-secret-switch (deploy/migration/admission) narrows to two
// writes: adding or removing KubeconfigFinalizer (issue 30), and, at
// cutover, host/port/database of the one Secret spec.cutover.switchSecret
// names — only if it is labelled migration.cairn.dev/switchable: "true" and
// the namespace opted in by binding the ClusterRole
// cairn-migration-secret-switcher (deploy/migration/rbac/secret_switcher.yaml,
// its verb "switch"), which the platform binds nowhere (docs/security.md). In the
// target cluster the kubeconfig's identity needs: batch/jobs get, list,
// create, delete; pods list; secrets and persistentvolumeclaims get (the
// references checked there) — see docs/migration.md.

// Defaults of the reconciler's timings.
const (
	DefaultPollInterval        = 10 * time.Second
	DefaultReplicationInterval = 30 * time.Second
)

// MigrationJobReconciler reconciles MigrationJobs.
type MigrationJobReconciler struct {
	reconcile.Base
	// Agent: the image of every step's pod unless spec.image says
	// otherwise, the result grace.
	agentjob.Agent
	// PollInterval is how often a Job in the target cluster (not watched)
	// is looked at, and a waiting MigrationJob looks again.
	PollInterval time.Duration
	// ReplicationInterval is how often a Continuous migration checks its
	// replication (a replication-status Job).
	ReplicationInterval time.Duration
	// Remote builds clients for target clusters; nil builds one from the
	// manager's clients.
	Remote *remote.Clients
	// AllowedImages are the images spec.image may name; nil allows
	// AgentImage only.
	AllowedImages *access.Images

	kubeconfigs *hold.Hold
}

// pass is one reconcile of one MigrationJob.
type pass = reconcile.Pass[*migrationv1.MigrationJob, state]

// state is what the steps share within one pass.
type state struct {
	// target is the client for Jobs that run in the target's cluster (the
	// local client unless Store transfer to a remote target).
	target client.Client
	// targetNS is the namespace of those Jobs.
	targetNS string
	// remote is true when target is another cluster's client.
	remote bool
	// outcome is what the steps found of the migration as a whole
	// (decide); summarize makes the conditions of it.
	outcome *outcome
	// notApproved is the ReferencesNotApproved stall of a started
	// MigrationJob whose approval is gone: only safety work runs
	// (safetyOnly).
	notApproved error
}

// SetupWithManager registers the controller with mgr.
func (r *MigrationJobReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.PollInterval <= 0 {
		r.PollInterval = DefaultPollInterval
	}
	if r.ReplicationInterval <= 0 {
		r.ReplicationInterval = DefaultReplicationInterval
	}
	s := reconcile.Setup[*migrationv1.MigrationJob, state](mgr, &r.Base, access.MigrationJob, &r.Agent)
	if r.Remote == nil {
		r.Remote = &remote.Clients{Metadata: r.Client, Secrets: r.APIReader, Scheme: r.Scheme}
	}
	if r.AllowedImages == nil && r.AgentImage != "" { // no image: Complete fails (agentjob.Agent)
		imgs, err := access.ParseImages([]string{r.AgentImage})
		if err != nil {
			return fmt.Errorf("migration controller: --agent-image: %w", err)
		}
		r.AllowedImages = imgs
	}
	s.Begin, s.Final, s.Validate = begin, (*migrationv1.MigrationJob).Finished, validate
	s.Steps = []reconcile.Step[*migrationv1.MigrationJob, state]{{Name: "check", Run: r.check},
		{Name: "hold-kubeconfig", Run: r.holdKubeconfig}, {Name: "connect", Run: r.connect}, {Name: "advance", Run: r.advance}}
	s.Summarize, s.Cleanup, s.Deleting, s.Transition = summarize, r.cleanup, deleting, transition
	r.kubeconfigs = kubeconfigHold()
	return s.Complete(ctx, mgr, opts, agentjob.Watch(migrationv1.MigrationJobLabel),
		reconcile.Referrers(migrationJobIndex, notFinished, references.Secret, references.PVC, references.ConfigMap),
		// The releaser of held kubeconfig Secrets.
		r.kubeconfigs.Releaser("migrationjob-kubeconfigs"))
}

// phases is the MigrationJob's phase machine: the handler of each phase
// that is not final runs the phase's agent steps (runSteps) and moves the
// phase on.
//
//	Pending → Prechecking → Copying → Verifying → ReadyForCutover → CuttingOver → Succeeded
//	          (precheck;     (copy, or   (verify)    (approval;         (cutover, replication-stop,
//	           dryRun ends)   export +               Continuous:         switch the Secret)
//	                          import)                replication-status)
//
// Any phase → Failed (a step failed; an abort step first undoes what the
// migration did to the source); dryRun ends in Succeeded after Prechecking.
func (r *MigrationJobReconciler) phases() map[migrationv1.Phase]func(context.Context, *pass) error {
	return map[migrationv1.Phase]func(context.Context, *pass) error{
		migrationv1.PhasePending:         r.begin,
		migrationv1.PhasePrechecking:     r.precheck,
		migrationv1.PhaseCopying:         r.copy,
		migrationv1.PhaseVerifying:       r.verify,
		migrationv1.PhaseReadyForCutover: r.readyForCutover,
		migrationv1.PhaseCuttingOver:     r.cutover,
	}
}

// deleting is the status of a MigrationJob whose cleanup is not finished.
func deleting(p *pass, err error) {
	msg := "deleting: removing the migration's Jobs"
	if needsAbort(p.Obj) {
		msg = "deleting: undoing what the migration changed on the source (abort Job: replication objects, read-only), then removing the migration's Jobs"
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	conditions.MarkReconciling(p.Obj, cairnv1.DeletingReason, msg)
}

func notFinished(o client.Object) bool {
	mj, ok := o.(*migrationv1.MigrationJob)
	return ok && !mj.Finished()
}

// cleanup is the finalizer's work: stop replication (Continuous), then
// delete the MigrationJob's Jobs here and in the target cluster. It never
// touches data in either database.
func (r *MigrationJobReconciler) cleanup(p *pass) finalizer.Cleanup {
	mj := p.Obj
	return finalizer.Cleanup{
		// The target cluster's Jobs first: they need no Job here, so they
		// go even while an abort cannot start (a namespace being deleted
		// refuses new Jobs).
		Run: finalizer.All(func(ctx context.Context) (bool, error) { return r.deleteRemote(ctx, mj) },
			func(ctx context.Context) (bool, error) { return r.deleteAll(ctx, mj) }),
		AlsoReportOn: finalizer.NamespaceOf(r.APIReader, mj, "MigrationJob"),
		LeftBehind: func(context.Context) string {
			msg := fmt.Sprintf("Jobs labelled %s=%s in namespace %s", migrationv1.MigrationJobLabel, mj.Name, mj.Namespace)
			if ranRemote(mj) {
				msg += fmt.Sprintf(", and Jobs labelled %s=%s in namespace %s of the target cluster", migrationv1.MigrationJobUIDLabel, mj.UID, targetNamespace(mj))
			}
			if needsAbort(mj) {
				msg += "; " + leftOnSource(mj)
			}
			return msg
		},
	}
}
