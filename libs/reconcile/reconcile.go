// Package reconcile is the one reconcile skeleton every Cairn operator is
// written on. A kind supplies its steps; the skeleton does the rest, in this
// order, on every pass:
//
//  1. get the object (NotFound is not an error: the object is gone, its
//     per-object metrics are forgotten);
//  2. if it is being deleted: run the kind's cleanup through the finalizer
//     (deadline, escape hatch) and write the Deleting status;
//  3. ensure the finalizer — and return after adding it: the write's own
//     event brings the object back;
//  4. prepare the pass (the head every kind shares): a copy of the object
//     with the kind's API defaults applied (Pass.Defaulted), the kind's
//     Begin (a new object's first phase), the end of the pass for a final
//     status (Final), the spec's validation (Validate → Stalled);
//     run the kind's ordered steps, each ensuring one thing; a step ends the
//     pass early with a typed error (Stalled, Waiting, Transient) or Done;
//     then the kind's Summarize hook, if any, decides the phase and the
//     Ready/Stalled/Reconciling conditions from the facts the steps
//     recorded (status is decided in one place);
//  5. write status once, with observedGeneration, only if it changed, with
//     an optimistic lock (a status computed from a stale read is never
//     stored: the pass fails with a conflict and is repeated);
//  6. after that write succeeded, derive Events and metrics from the change
//     old → new status — so a pass whose write conflicted emits nothing, and
//     the pass that stores a transition emits it exactly once.
//
// A step that must record progress before it goes on (resolve-then-create,
// a resumable copy) calls Pass.Checkpoint: the same write and the same
// derivation of Events, mid-pass.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/status"
)

// Object is a kind the skeleton reconciles: conditions, observedGeneration
// and a phase in its status.
type Object interface {
	conditions.Object
	// SetObservedGeneration records the metadata.generation acted on.
	SetObservedGeneration(int64)
	// GetPhase returns status.phase (for logs and transition Events).
	GetPhase() string
}

// Step ensures one thing of the desired state. It reads and writes
// p.Obj's status; it returns nil to go on to the next step, or ends the pass
// with Stalled, Waiting, Transient (or any error), or Done.
type Step[T Object, S any] struct {
	// Name is logged with the step's outcome.
	Name string
	Run  func(ctx context.Context, p *Pass[T, S]) error
}

// Reconciler is the skeleton for one kind T whose steps share a state S
// within a pass. It implements
// controller-runtime's reconcile.Reconciler.
type Reconciler[T Object, S any] struct {
	// Kind names the kind in logs, e.g. "BackupJob".
	Kind string
	// Client reads (from the cache) and writes.
	Client client.Client
	// Recorder emits the transition Events.
	Recorder events.EventRecorder
	// New returns an empty object of the kind.
	New func() T
	// Finalizer, when set, is added to every live object and drives cleanup
	// of a deleted one.
	Finalizer *finalizer.Finalizer
	// Defaults applies the kind's API defaults (Setup: its access.Kind's,
	// the defaulting webhook's own) to the copy of the object every pass
	// reads its spec from (Pass.Defaulted).
	Defaults func(obj T)
	// Begin, when set, starts every pass of a live object, before Final
	// and the steps: e.g. the first phase of a new object, the status
	// fields every phase shows.
	Begin func(p *Pass[T, S])
	// Final, when set, reports a final status (a one-off object that
	// ended): no step runs, as if the first had returned Done.
	Final func(obj T) bool
	// Validate, when set, checks the defaulted spec before the steps: its
	// errors stall the object (Valid) with the reason it returns (empty:
	// InvalidSpec).
	Validate func(p *Pass[T, S]) (field.ErrorList, string)
	// Steps run in order on a live object.
	Steps []Step[T, S]
	// Summarize runs after the steps (also when one ended the pass) and
	// before the write: it decides the phase and conditions from what the
	// steps recorded in status and in the pass' state, so they are decided
	// in one place. err is the error that ended the steps (nil, Done, or a
	// typed one); it returns the error the pass ends with. A Checkpoint
	// calls it too, with nil (Pass.AtCheckpoint).
	Summarize func(p *Pass[T, S], err error) error
	// Cleanup is what the finalizer runs for an object being deleted; nil
	// removes the finalizer at once.
	Cleanup func(p *Pass[T, S]) finalizer.Cleanup
	// Deleting sets the status of an object whose cleanup is not finished
	// (err is the cleanup step's error, if any); nil leaves status alone.
	Deleting func(p *Pass[T, S], err error)
	// Transition emits the kind's own Events and counts its metrics for a
	// change old → new that was just stored. The skeleton has already
	// emitted the generic transition Event (see TransitionEvent).
	Transition func(ctx context.Context, rec events.EventRecorder, old, new T)
	// Observe sets the kind's gauges from the stored status, after every pass
	// that ends with status stored (written or unchanged), so metrics users
	// alert on exist after a restart or a failover.
	Observe func(obj T)
	// Forget drops per-object metrics of an object that is gone.
	Forget func(key types.NamespacedName)

	// setupErr is what Setup found; Complete returns it.
	setupErr error
}

var _ crreconcile.Reconciler = &Reconciler[Object, struct{}]{}

// Pass is one reconcile of one object.
type Pass[T Object, S any] struct {
	// Obj is the object as read, its status changed by the steps.
	Obj T
	// Defaulted is a copy of Obj with the kind's API defaults applied
	// (Reconciler.Defaults): the spec the steps act on, the same for an
	// object admitted while the defaulting webhook was not running. Read
	// it, never write it.
	Defaulted T
	// Original is the object as last stored: the base of the status patch
	// and the "old" of the transition.
	Original T
	// State is what the kind's steps share within one pass (zero at the
	// start of every pass): e.g. the children a step listed.
	State S

	r            *Reconciler[T, S]
	requeue      time.Duration
	writeFailed  bool
	atCheckpoint bool
}

// AtCheckpoint tells Summarize that it is deciding the status a
// Checkpoint stores mid-pass, not the status the pass ends with.
func (p *Pass[T, S]) AtCheckpoint() bool { return p.atCheckpoint }

// RequeueAfter asks to look at the object again within d (the earliest of
// all requests of the pass wins).
func (p *Pass[T, S]) RequeueAfter(d time.Duration) {
	if d > 0 && (p.requeue == 0 || d < p.requeue) {
		p.requeue = d
	}
}

// Checkpoint stores the status as it is now (only if it changed), emits the
// transition Events for it, and makes it the base of the rest of the pass.
// Use it when the next step must not run unless this progress is recorded
// (e.g. record which artifact a restore uses before creating its Job). On
// error nothing of the pass so far reaches status and the pass must end with
// the error: the next pass decides again from fresh status.
func (p *Pass[T, S]) Checkpoint(ctx context.Context) error {
	if p.r.Summarize != nil {
		// What is stored is decided in one place, mid-pass too.
		p.atCheckpoint = true
		_ = p.r.Summarize(p, nil)
		p.atCheckpoint = false
	}
	if err := p.r.write(ctx, p); err != nil {
		p.writeFailed = true
		setStatus(p.Obj, p.Original)
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Reconcile runs one pass of the skeleton.
func (r *Reconciler[T, S]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			if r.Forget != nil {
				r.Forget(req.NamespacedName)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	log := ctrl.LoggerFrom(ctx).WithValues(r.Kind, klog.KObj(obj), "phase", obj.GetPhase())
	ctx = ctrl.LoggerInto(ctx, log)
	p := &Pass[T, S]{Obj: obj, Original: obj.DeepCopyObject().(T), r: r}

	if !obj.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, p)
	}
	if r.Finalizer != nil {
		added, err := r.Finalizer.Ensure(ctx, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		if added {
			log.V(1).Info("finalizer added", "finalizer", r.Finalizer.Name)
			return ctrl.Result{}, nil
		}
		// Ensure patched nothing: Original still matches what is stored.
	}

	stepErr := r.prepare(p)
	if stepErr != nil {
		log.V(1).Info("prepare ended the pass", "outcome", stepErr.Error())
	}
	for _, s := range r.Steps {
		if stepErr != nil {
			break
		}
		if stepErr = s.Run(ctx, p); stepErr != nil {
			log.V(1).Info("step ended the pass", "step", s.Name, "outcome", stepErr.Error())
		}
	}
	if p.writeFailed {
		return ctrl.Result{}, stepErr
	}
	if r.Summarize != nil {
		stepErr = r.Summarize(p, stepErr)
	}
	res, err := r.outcome(ctx, p, stepErr)
	if werr := r.write(ctx, p); werr != nil {
		return ctrl.Result{}, errors.Join(err, fmt.Errorf("writing status: %w", werr))
	}
	return res, err
}

// prepare is the head of every pass of a live object, before the steps:
// the defaulted copy, Begin, Final (Done) and Validate (Stalled).
func (r *Reconciler[T, S]) prepare(p *Pass[T, S]) error {
	p.Defaulted = p.Obj.DeepCopyObject().(T)
	if r.Defaults != nil {
		r.Defaults(p.Defaulted)
	}
	if r.Begin != nil {
		r.Begin(p)
	}
	if r.Final != nil && r.Final(p.Obj) {
		return errDone
	}
	if r.Validate != nil {
		return Valid(r.Validate(p))
	}
	return nil
}

// outcome applies a step's typed error to the conditions and turns it into
// the pass' result.
func (r *Reconciler[T, S]) outcome(ctx context.Context, p *Pass[T, S], err error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var (
		stalled *StalledError
		waiting *WaitingError
	)
	switch {
	case err == nil, errors.Is(err, errDone):
		return ctrl.Result{RequeueAfter: p.requeue}, nil
	case errors.As(err, &stalled):
		conditions.MarkStalled(p.Obj, stalled.Reason, stalled.Message)
		log.Info("stalled", "reason", stalled.Reason, "message", stalled.Message)
		// Terminal: no retry until the object (or what it watches) changes.
		return ctrl.Result{}, crreconcile.TerminalError(err)
	case errors.As(err, &waiting):
		conditions.MarkReconciling(p.Obj, waiting.Reason, waiting.Message)
		log.Info("waiting", "reason", waiting.Reason, "message", waiting.Message)
		p.RequeueAfter(waiting.After)
		return ctrl.Result{RequeueAfter: p.requeue}, nil
	default:
		reason := cairnv1.ReconcileErrorReason
		var tr *TransientError
		if errors.As(err, &tr) && tr.Reason != "" {
			reason = tr.Reason
		}
		conditions.MarkReconciling(p.Obj, reason, err.Error())
		// The work queue retries with its exponential backoff.
		return ctrl.Result{}, err
	}
}

// write stores p.Obj's status if it changed since p.Original, then derives
// Events and metrics from the change, and makes it the new base.
func (r *Reconciler[T, S]) write(ctx context.Context, p *Pass[T, S]) error {
	p.Obj.SetObservedGeneration(p.Obj.GetGeneration())
	wrote, err := status.Write(ctx, r.Client, p.Original, p.Obj)
	if err != nil {
		return err
	}
	if wrote {
		old := p.Original
		if old.GetPhase() != p.Obj.GetPhase() {
			ctrl.LoggerFrom(ctx).Info("phase changed", "from", phaseOrNone(old.GetPhase()), "to", p.Obj.GetPhase())
		}
		if r.Recorder != nil {
			TransitionEvent(r.Recorder, old, p.Obj)
			if r.Transition != nil {
				r.Transition(ctx, r.Recorder, old, p.Obj)
			}
		}
	}
	if r.Observe != nil {
		r.Observe(p.Obj)
	}
	p.Original = p.Obj.DeepCopyObject().(T)
	return nil
}

func (r *Reconciler[T, S]) reconcileDelete(ctx context.Context, p *Pass[T, S]) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if r.Finalizer == nil {
		return ctrl.Result{}, nil
	}
	cleanup := finalizer.Cleanup{Run: func(context.Context) (bool, error) { return true, nil }}
	if r.Cleanup != nil {
		cleanup = r.Cleanup(p)
	}
	// A failed cleanup step is in res.Err: it goes into the Deleting
	// condition, and the pass is looked at again at res.RequeueAfter (never
	// after the deadline) rather than at the work queue's backoff. err is
	// the finalizer's own failure (its removal patch).
	res, err := r.Finalizer.Finalize(ctx, p.Obj, cleanup)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res.Removed {
		if r.Forget != nil {
			r.Forget(client.ObjectKeyFromObject(p.Obj))
		}
		log.Info("cleanup finished; finalizer removed")
		return ctrl.Result{}, nil
	}
	if res.Err != nil {
		log.Info("cleanup step failed; retrying", "after", res.RequeueAfter, "error", res.Err.Error())
	}
	if r.Deleting != nil {
		// One condition, rewritten only when its reason or message changes
		// (status.Write compares): no write while a cleanup just waits.
		r.Deleting(p, res.Err)
		if werr := r.write(ctx, p); werr != nil && !apierrors.IsNotFound(werr) {
			return ctrl.Result{}, werr
		}
	}
	return ctrl.Result{RequeueAfter: res.RequeueAfter}, nil
}

// TransitionEvent emits the one generic Event of a stored transition: when
// the phase or the Ready condition's reason changed, an Event whose reason
// is Ready's reason and whose note is Ready's message — Warning when the
// object is Stalled, Normal otherwise. Every operator emits it the same way.
func TransitionEvent[T Object](rec events.EventRecorder, old, new T) {
	ready := conditions.Get(new, cairnv1.ReadyCondition)
	if ready == nil {
		return
	}
	oldReason := ""
	if c := conditions.Get(old, cairnv1.ReadyCondition); c != nil {
		oldReason = c.Reason
	}
	if old.GetPhase() == new.GetPhase() && oldReason == ready.Reason {
		return
	}
	typ := corev1.EventTypeNormal
	if conditions.IsTrue(new, cairnv1.StalledCondition) {
		typ = corev1.EventTypeWarning
	}
	rec.Eventf(new, nil, typ, ready.Reason, "Phase"+phaseOrNone(new.GetPhase()), "%s", ready.Message)
}

func phaseOrNone(p string) string {
	if p == "" {
		return "None"
	}
	return p
}

// setStatus replaces to's status with a copy of from's (both the same
// kind), so a failed Checkpoint leaves nothing of the pass in the object.
func setStatus[T Object](to, from T) {
	src, err := runtime.DefaultUnstructuredConverter.ToUnstructured(from)
	if err != nil {
		return
	}
	dst, err := runtime.DefaultUnstructuredConverter.ToUnstructured(to)
	if err != nil {
		return
	}
	if st, ok := src["status"]; ok {
		dst["status"] = runtime.DeepCopyJSONValue(st)
	} else {
		delete(dst, "status")
	}
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(dst, to)
}
