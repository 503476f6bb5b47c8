package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
	"cairn.dev/libs/remote"
	"cairn.dev/operators/migration/internal/migspec"
)

// Labels on every Job and Pod the operator creates. The operator's cache
// holds only objects with ManagedByLabel=ManagedByValue.
const (
	ManagedByLabel = agentjob.ManagedByLabel
	ManagedByValue = "cairn-migration-operator"
	NameLabel      = "app.kubernetes.io/name"
	NameValue      = "cairn-agent"
	ComponentLabel = "app.kubernetes.io/component"
	ComponentValue = "migration"
)

// CutoverEventReason is the reason of the Event listing what cutover did.
const CutoverEventReason = "CutoverActions"

// Secret keys spec.cutover.switchSecret gets at cutover (the API's).
const (
	SwitchHostKey     = migrationv1.SwitchHostKey
	SwitchPortKey     = migrationv1.SwitchPortKey
	SwitchDatabaseKey = migrationv1.SwitchDatabaseKey
)

// runsRemote reports whether target-side Jobs run in the target cluster.
func runsRemote(spec *migrationv1.MigrationJobSpec) bool {
	return spec.Target.KubeconfigSecretRef != nil && spec.Transfer.Method == migrationv1.TransferStore
}

// targetNamespace is the namespace of the Jobs in the target cluster.
func targetNamespace(mj *migrationv1.MigrationJob) string {
	if mj.Spec.Target.Namespace != "" {
		return mj.Spec.Target.Namespace
	}
	return mj.Namespace
}

// jobLabels are the labels of a step's Job and its pods.
func jobLabels(mj *migrationv1.MigrationJob, step string) map[string]string {
	return map[string]string{
		ManagedByLabel:                         ManagedByValue,
		NameLabel:                              NameValue,
		ComponentLabel:                         ComponentValue,
		migrationv1.MigrationJobLabel:          mj.Name,
		migrationv1.MigrationJobNamespaceLabel: mj.Namespace,
		migrationv1.MigrationJobUIDLabel:       string(mj.UID),
		migrationv1.StepLabel:                  step,
	}
}

// sides says which databases a step talks to. spec must be defaulted.
func sides(step string, spec *migrationv1.MigrationJobSpec) (source, target bool) {
	switch step {
	case contract.StepPrecheckSource, contract.StepExport:
		return true, false
	case contract.StepCutover:
		// Full: the source is compared again with the live target (Direct)
		// or with the export's inventory (Store).
		return true, finalCheck(spec) && spec.Transfer.Method == migrationv1.TransferDirect
	case contract.StepAbort:
		// Continuous: the subscription is dropped on the target.
		return true, spec.Mode == migrationv1.ModeContinuous
	case contract.StepPrecheckTarget, contract.StepImport:
		return false, true
	case contract.StepVerify:
		// Store transfer: the target against the inventory export recorded.
		return spec.Transfer.Method == migrationv1.TransferDirect, true
	}
	return true, true // precheck, copy, replication-*
}

// finalCheck reports whether cutover compares the source again, writes
// stopped, before switching anything: Full mode with verification.
func finalCheck(spec *migrationv1.MigrationJobSpec) bool {
	return spec.Mode == migrationv1.ModeFull && spec.Verify != migrationv1.VerifyNone
}

// usesStore says whether a step's Job gets the store.
func usesStore(step string, transfer migrationv1.TransferMethod) bool {
	if transfer != migrationv1.TransferStore {
		return false
	}
	switch step {
	case contract.StepPrecheckSource, contract.StepPrecheckTarget, contract.StepExport, contract.StepImport, contract.StepVerify, contract.StepCutover:
		return true
	}
	return false
}

// desiredJob renders a step's Job. spec is mj's spec with defaults applied.
func (r *MigrationJobReconciler) desiredJob(mj *migrationv1.MigrationJob, spec *migrationv1.MigrationJobSpec, st *migrationv1.StepStatus, artifact *cairnv1.Artifact) (*batchv1.Job, error) {
	lbls := jobLabels(mj, st.Step)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: st.Namespace, Name: st.JobName, Labels: lbls},
		Spec:       agentjob.JobSpec(stepSpec(mj, spec, st.Step, artifact, r.AgentImage, lbls)),
	}
	if st.Cluster == migrationv1.ClusterLocal {
		if err := ownership.SetController(mj, job, r.Scheme); err != nil {
			return nil, err
		}
	}
	return job, nil
}

// stepSpec is the agent run of one step: the databases it reaches, the
// store when it uses one, and the settings it reads.
func stepSpec(mj *migrationv1.MigrationJob, spec *migrationv1.MigrationJobSpec, step string, artifact *cairnv1.Artifact, image string, lbls map[string]string) agentjob.Spec {
	src, tgt := sides(step, spec)
	as := agentjob.Spec{
		Command:               contract.CommandMigrate,
		Step:                  step,
		Image:                 image,
		CatalogKey:            mj.Namespace + "/" + mj.Name,
		Labels:                lbls,
		BackoffLimit:          spec.MaxRetries,
		ActiveDeadlineSeconds: spec.ActiveDeadlineSeconds,
		Resources:             spec.Resources,
	}
	if spec.Image != "" {
		as.Image = spec.Image
	}
	if src {
		source := spec.Source
		as.Database = &source
	} else {
		as.Engine = spec.Target.Engine
	}
	if usesStore(step, spec.Transfer.Method) && spec.Transfer.Storage != nil {
		as.Storage = *spec.Transfer.Storage
		as.Encryption = transferEncryption(step, spec)
	}
	if (step == contract.StepImport || step == contract.StepVerify || step == contract.StepCutover) && artifact != nil {
		as.Artifact = artifact.Path
	}
	m := &agentjob.MigrationSpec{
		ID: mj.Namespace + "/" + mj.Name, UID: string(mj.UID),
		Mode: string(spec.Mode), Verify: string(spec.Verify), Parallel: *spec.Transfer.Parallelism,
		AllowNonEmptyTarget: spec.AllowNonEmptyTarget,
	}
	if o := spec.Objects; o != nil {
		m.Objects = &agentjob.Objects{Include: o.Include, Exclude: o.Exclude}
	}
	switch step {
	case contract.StepCutover, contract.StepPrecheck, contract.StepPrecheckSource:
		// Precheck checks the privileges cutover's read-only needs.
		m.SourceReadOnly = ptr.To(spec.Cutover.SourceReadOnly)
		if step == contract.StepCutover {
			// With the writers stopped, a Full cutover copies again what
			// changed since verification.
			m.WritersStopped = ptr.To(spec.Cutover.WritersStopped)
		}
	case contract.StepAbort:
		// Undo the read-only only if a cutover may have set it.
		m.SourceReadOnly = ptr.To(readOnlyMayBeSet(mj, spec))
	}
	if strings.HasPrefix(step, "replication-") || step == contract.StepAbort || step == contract.StepVerify && spec.Mode == migrationv1.ModeContinuous {
		m.MaxRetainedWALBytes = ptr.To(spec.MaxRetainedWALBytes())
	}
	if tgt {
		target := spec.Target.DatabaseRef
		m.Target = &target
	}
	as.Migration = m
	return as
}

// localReferences are the objects the Jobs in this cluster need: the
// source's credentials, the target's when it is reached from here, the
// store (Store transfer: export runs here), the cutover Secret and the
// target cluster's kubeconfig.
func localReferences(ns string, spec *migrationv1.MigrationJobSpec) []references.Ref {
	var storage cairnv1.StorageSpec
	if spec.Transfer.Storage != nil {
		storage = *spec.Transfer.Storage
	}
	refs := agentjob.References(ns, &spec.Source, "spec.source", storage, "spec.transfer.storage")
	refs = append(refs, exportKeyReferences(ns, spec)...)
	if !runsRemote(spec) {
		target := spec.Target.DatabaseRef
		refs = append(refs, agentjob.References(ns, &target, "spec.target", cairnv1.StorageSpec{}, "")...)
		refs = append(refs, importKeyReferences(ns, spec)...)
	}
	if k := spec.Target.KubeconfigSecretRef; k != nil {
		key := k.Key
		if key == "" {
			key = remote.DefaultKey
		}
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: ns, Name: k.Name, Keys: []string{key}, Field: "spec.target.kubeconfigSecretRef"})
	}
	if s := spec.Cutover.SwitchSecret; s != nil {
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: ns, Name: s.Name, Field: "spec.cutover.switchSecret"})
	}
	return refs
}

// remoteReferences are the objects the Jobs in the target cluster need.
func remoteReferences(ns string, spec *migrationv1.MigrationJobSpec) []references.Ref {
	var storage cairnv1.StorageSpec
	if spec.Transfer.Storage != nil {
		storage = *spec.Transfer.Storage
	}
	target := spec.Target.DatabaseRef
	return append(agentjob.References(ns, &target, "spec.target", storage, "spec.transfer.storage"), importKeyReferences(ns, spec)...)
}

// migrationJobIndex is what a MigrationJob is indexed under: the local
// objects it refers to.
func migrationJobIndex(o client.Object) []ownership.Reference {
	mj, ok := o.(*migrationv1.MigrationJob)
	if !ok {
		return nil
	}
	spec := mj.Spec.DeepCopy()
	spec.SetDefaults()
	return references.References(localReferences(mj.Namespace, spec))
}

// switchSecret rewrites the host, port and database keys of the Secret
// spec.cutover.switchSecret names to the target's. Other keys stay. A
// Secret without the opt-in label migrationv1.SwitchableLabel="true" is
// never written: Stalled, SwitchSecretNotSwitchable.
func (r *MigrationJobReconciler) switchSecret(ctx context.Context, mj *migrationv1.MigrationJob, spec *migrationv1.MigrationJobSpec) error {
	name := spec.Cutover.SwitchSecret.Name
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: name}, sec); err != nil {
		return fmt.Errorf("reading Secret %s to switch it to the target: %w", name, err)
	}
	if sec.Labels[migrationv1.SwitchableLabel] != migrationv1.SwitchableValue {
		return reconcile.Stalled(migrationv1.SwitchSecretNotSwitchableReason, "%s", migspec.NotSwitchable(mj.Namespace, name))
	}
	t := spec.Target
	want := map[string]string{SwitchHostKey: t.Host, SwitchPortKey: strconv.Itoa(int(t.Port)), SwitchDatabaseKey: t.Database}
	same := true
	for k, v := range want {
		if string(sec.Data[k]) != v {
			same = false
		}
	}
	if same {
		return nil
	}
	base := sec.DeepCopy()
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	for k, v := range want {
		sec.Data[k] = []byte(v)
	}
	if err := r.Client.Patch(ctx, sec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("switching Secret %s to the target: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("switched Secret to the target", "Secret", name, "target", t.Host)
	return nil
}

// replicationMayRun reports whether a Continuous migration may have
// replication objects (publication, slot, subscription): replication-start
// was recorded (its Job may have created some, even if it failed) and
// nothing dropped them since.
func replicationMayRun(mj *migrationv1.MigrationJob) bool {
	if mj.Spec.Mode != migrationv1.ModeContinuous || mj.Status.Step(contract.StepReplicationStart) == nil {
		return false
	}
	return mj.Status.Replication == nil || !mj.Status.Replication.Stopped
}

// readOnlyMayBeSet reports whether a cutover may have made the source
// read-only (its step was recorded).
func readOnlyMayBeSet(mj *migrationv1.MigrationJob, spec *migrationv1.MigrationJobSpec) bool {
	return spec.Cutover.SourceReadOnly && mj.Status.Step(contract.StepCutover) != nil
}

// needsAbort reports whether a MigrationJob that did not succeed may have
// changed the source (replication objects, read-only) and the abort step
// has not undone it yet.
func needsAbort(mj *migrationv1.MigrationJob) bool {
	if mj.Status.Phase == migrationv1.PhaseSucceeded {
		return false
	}
	if st := mj.Status.Step(contract.StepAbort); st != nil && st.Phase == migrationv1.StepSucceeded {
		return false
	}
	return replicationMayRun(mj) || readOnlyMayBeSet(mj, &mj.Spec)
}

// deleteAll is the finalizer's cleanup here: undo what the migration
// changed on the source if it did not succeed (an abort Job: replication
// objects, read-only), then delete every Job of mj in this cluster. Done
// when none is left. (The target cluster's Jobs: deleteRemote.)
func (r *MigrationJobReconciler) deleteAll(ctx context.Context, mj *migrationv1.MigrationJob) (bool, error) {
	if needsAbort(mj) {
		done, err := r.abortForDeletion(ctx, mj)
		if err != nil || !done {
			return false, err
		}
	}
	gone, err := ownership.DeleteChildren(ctx, r.Client, mj, ownership.Children{
		Kinds: []client.ObjectList{&batchv1.JobList{}}, Labels: map[string]string{migrationv1.MigrationJobLabel: mj.Name}, Controlled: true,
	})
	if err != nil {
		return false, err
	}
	return gone, nil
}

// ranRemote reports whether a step was recorded in the target cluster (so
// a Job of mj's may exist there).
func ranRemote(mj *migrationv1.MigrationJob) bool {
	for _, st := range mj.Status.Steps {
		if st.Cluster == migrationv1.ClusterTarget {
			return true
		}
	}
	return false
}

// abortForDeletion runs the abort step for a deleted MigrationJob that may
// have changed the source. A replication-start still running is waited for
// first (it may create a slot after an abort that ran beside it). Once the
// abort succeeded it is recorded in status (written by the skeleton's
// Deleting write); it never reports done itself. A failed abort is left as
// it is: the finalizer's deadline Event says what may be left.
func (r *MigrationJobReconciler) abortForDeletion(ctx context.Context, mj *migrationv1.MigrationJob) (bool, error) {
	spec := mj.Spec.DeepCopy()
	spec.SetDefaults()
	if st := mj.Status.Step(contract.StepReplicationStart); st != nil && st.Phase != migrationv1.StepSucceeded && st.Phase != migrationv1.StepFailed {
		start := &batchv1.Job{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.JobName}, start)
		if err == nil && !agentjob.JobOutcome(start).Finished {
			return false, nil // its Job (or the Job's status) brings the MigrationJob back
		}
		if client.IgnoreNotFound(err) != nil {
			return false, err
		}
	}
	st := &migrationv1.StepStatus{Step: contract.StepAbort, AgentRun: cairnv1.AgentRun{JobName: stepJobName(mj, contract.StepAbort, 0)},
		Cluster: migrationv1.ClusterLocal, Namespace: mj.Namespace}
	job := &batchv1.Job{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: st.Namespace, Name: st.JobName}, job)
	if apierrors.IsNotFound(err) {
		desired, err := r.desiredJob(mj, spec, st, nil)
		if err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating Job %s to undo the migration's changes to the source: %w", st.JobName, err)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out := agentjob.JobOutcome(job)
	if !out.Succeeded {
		// Running, or failed: a failed abort is not retried behind the
		// user's back; the finalizer's deadline reports what is left.
		return false, nil
	}
	// Recorded in status (the Deleting write of this pass), so the next
	// pass deletes every Job, this one too, without starting another.
	if spec.Mode == migrationv1.ModeContinuous {
		if mj.Status.Replication == nil {
			mj.Status.Replication = &migrationv1.ReplicationStatus{}
		}
		mj.Status.Replication.Stopped = true
	}
	if cur := mj.Status.Step(contract.StepAbort); cur != nil {
		cur.Phase = migrationv1.StepSucceeded
	} else {
		now := metav1.Now()
		st.StartTime, st.Phase = &now, migrationv1.StepSucceeded
		mj.Status.Steps = append(mj.Status.Steps, *st)
	}
	return false, nil
}

// transition emits the Event of a cutover that was just stored (what it
// did, one line each), beyond the generic transition Event.
func transition(_ context.Context, rec events.EventRecorder, old, mj *migrationv1.MigrationJob) {
	if mj.Status.Cutover != nil && mj.Status.Cutover.Time != nil && (old.Status.Cutover == nil || old.Status.Cutover.Time == nil) {
		// One Event: the events API folds Events of the same reason and
		// action into one series, keeping the first note.
		rec.Eventf(mj, nil, corev1.EventTypeNormal, CutoverEventReason, "CutOver", "%s", strings.Join(mj.Status.Cutover.Actions, "; "))
	}
	for _, st := range mj.Status.Steps {
		if w := newWarnings(old.Status.Step(st.Step), st); len(w) > 0 {
			rec.Eventf(mj, nil, corev1.EventTypeWarning, AgentWarningReason, "Step", "step %s: %s", st.Step, strings.Join(w, "; "))
		}
	}
	if mj.Finished() && !old.Finished() {
		metrics.Finish(mj)
	}
}

// AgentWarningReason is the reason of the Warning Event a step's new
// agent warnings raise.
const AgentWarningReason = "AgentWarning"

// newWarnings are the warnings of step st that its old record did not
// have.
func newWarnings(old *migrationv1.StepStatus, st migrationv1.StepStatus) []string {
	var out []string
	for _, w := range st.Warnings {
		if old == nil || !slices.Contains(old.Warnings, w) {
			out = append(out, w)
		}
	}
	return out
}

// DesiredFirstJob is the Job of the first step the operator runs for mj (a
// Direct transfer in this cluster: the precheck), with its controller
// reference, as the operator creates it with agent image image. The
// benchmark's floor writes exactly this Job (operators/migration/internal/bench).
func DesiredFirstJob(mj *migrationv1.MigrationJob, image string, scheme *runtime.Scheme) (*batchv1.Job, error) {
	spec := mj.Spec.DeepCopy()
	spec.SetDefaults()
	r := &MigrationJobReconciler{Base: reconcile.Base{Scheme: scheme}, Agent: agentjob.Agent{AgentImage: image}}
	st := &migrationv1.StepStatus{Step: contract.StepPrecheck, AgentRun: cairnv1.AgentRun{JobName: stepJobName(mj, contract.StepPrecheck, 0)},
		Cluster: migrationv1.ClusterLocal, Namespace: mj.Namespace}
	return r.desiredJob(mj, spec, st, nil)
}
