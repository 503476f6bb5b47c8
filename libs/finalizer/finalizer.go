// Package finalizer adds a finalizer, runs an owner's cleanup while it is being
// deleted, and removes the finalizer when cleanup is done — or when cleanup
// cannot finish: after a deadline measured from the deletion request, or at
// once when the user sets the escape-hatch annotation. Then a Warning Event says
// what was left behind. An object never stays Terminating forever because an
// external system (a store, a database) is down.
package finalizer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// SkipCleanupAnnotation, set to "true" on an object being deleted, removes
// the finalizer without (further) cleanup. The Warning Event lists what is left.
const SkipCleanupAnnotation = "cairn.dev/skip-cleanup"

// Event reasons.
const (
	// CleanupSkippedReason: the escape-hatch annotation ended cleanup.
	CleanupSkippedReason = "CleanupSkipped"
	// CleanupDeadlineExceededReason: cleanup did not finish within the deadline.
	CleanupDeadlineExceededReason = "CleanupDeadlineExceeded"
)

// Cleanup is what an owner must do before it may go.
type Cleanup struct {
	// Run does the next step of cleanup. It returns true when nothing is left;
	// false (and no error) when it must be called again (e.g. waiting for a
	// cleanup Job to finish). It must be safe to repeat.
	Run func(ctx context.Context) (done bool, err error)
	// LeftBehind describes, for a human, what would remain if cleanup stopped
	// now (e.g. "CronJob ns/x; artifacts under s3://bucket/prefix").
	LeftBehind func(ctx context.Context) string
	// Abandon, when set, runs when cleanup is given up (deadline, escape
	// hatch) just before the finalizer goes: it drops what cleanup holds for
	// itself (e.g. credentials it captured). Errors are not fatal: they are
	// added to the Warning Event.
	Abandon func(ctx context.Context) error
	// AlsoReportOn, when set and returning an object, is another object the
	// Warning Event is about, its note starting with about (e.g. "BackupJob
	// ns/x"): the Namespace of an object whose namespace is being deleted,
	// where new Events are refused (and would go with the namespace).
	AlsoReportOn func(ctx context.Context) (regarding client.Object, about string)
}

// Finalizer is one named finalizer with a cleanup deadline.
type Finalizer struct {
	// Name of the finalizer, e.g. "backup.cairn.dev/cleanup".
	Name string
	// Deadline after the deletion request when cleanup is abandoned.
	Deadline time.Duration
	// PollInterval is how soon to look again when cleanup is not done yet
	// (default 5s).
	PollInterval time.Duration
	// RetryInterval is how soon to look again when cleanup failed (default
	// 5s). Neither interval ever goes past the deadline: the pass after the
	// last one is at the deadline, to the second.
	RetryInterval time.Duration
	// Client removes the finalizer (a merge patch of metadata.finalizers).
	Client client.Client
	// Recorder emits the Warning Event when cleanup is abandoned.
	Recorder events.EventRecorder
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Ensure adds the finalizer when obj is not being deleted and lacks it. It
// returns true when it wrote; the caller should return and let the write's
// event bring it back (Cluster API's EnsureFinalizer pattern).
func (f *Finalizer) Ensure(ctx context.Context, obj client.Object) (bool, error) {
	if !obj.GetDeletionTimestamp().IsZero() || controllerutil.ContainsFinalizer(obj, f.Name) {
		return false, nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(obj, f.Name)
	if err := f.Client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("adding finalizer %s: %w", f.Name, err)
	}
	return true, nil
}

// Result of Finalize.
type Result struct {
	// Removed is true when the finalizer is gone: the object may disappear.
	Removed bool
	// RequeueAfter is set when cleanup must be looked at again: never later
	// than the deadline.
	RequeueAfter time.Duration
	// Err is why the last cleanup step failed, for the object's condition.
	// It is not returned as an error: the work queue's exponential backoff
	// would decide when the deadline is next looked at (issue 30); the
	// failed step is tried again after RetryInterval, or at the deadline.
	Err error
}

// Finalize runs cleanup for an object being deleted that still holds the
// finalizer, and removes the finalizer when cleanup is done, the deadline has
// passed, or the escape hatch is set. For an object not being deleted, or
// already without the finalizer, it does nothing.
func (f *Finalizer) Finalize(ctx context.Context, obj client.Object, cleanup Cleanup) (Result, error) {
	ts := obj.GetDeletionTimestamp()
	if ts.IsZero() || !controllerutil.ContainsFinalizer(obj, f.Name) {
		return Result{}, nil
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	deadline := ts.Add(f.Deadline)

	if obj.GetAnnotations()[SkipCleanupAnnotation] == "true" {
		return f.abandon(ctx, obj, cleanup, CleanupSkippedReason,
			fmt.Sprintf("cleanup skipped by annotation %s", SkipCleanupAnnotation))
	}
	if !now().Before(deadline) {
		return f.abandon(ctx, obj, cleanup, CleanupDeadlineExceededReason,
			fmt.Sprintf("cleanup did not finish within %s of the deletion request", f.Deadline))
	}

	done, err := cleanup.Run(ctx)
	if err != nil || !done {
		wait := f.PollInterval
		if wait <= 0 {
			wait = 5 * time.Second
		}
		if err != nil {
			wait = f.RetryInterval
			if wait <= 0 {
				wait = 5 * time.Second
			}
		}
		if left := deadline.Sub(now()); left < wait {
			wait = max(left, time.Millisecond)
		}
		return Result{RequeueAfter: wait, Err: err}, nil
	}
	if err := f.remove(ctx, obj); err != nil {
		return Result{}, err
	}
	return Result{Removed: true}, nil
}

func (f *Finalizer) abandon(ctx context.Context, obj client.Object, cleanup Cleanup, reason, why string) (Result, error) {
	left := "nothing"
	if cleanup.LeftBehind != nil {
		if l := cleanup.LeftBehind(ctx); l != "" {
			left = l
		}
	}
	// Where else to report is decided before Abandon releases what cleanup held.
	var other client.Object
	var about string
	if cleanup.AlsoReportOn != nil {
		other, about = cleanup.AlsoReportOn(ctx)
	}
	if cleanup.Abandon != nil {
		if err := cleanup.Abandon(ctx); err != nil {
			left += fmt.Sprintf(" (and releasing what cleanup held failed: %v)", err)
		}
	}
	if err := f.remove(ctx, obj); err != nil {
		return Result{}, err
	}
	if f.Recorder != nil {
		f.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Finalize",
			"%s; finalizer %s removed; left behind: %s", why, f.Name, left)
		if other != nil {
			f.Recorder.Eventf(other, nil, corev1.EventTypeWarning, reason, "Finalize",
				"%s: %s; finalizer %s removed; left behind: %s", about, why, f.Name, left)
		}
	}
	return Result{Removed: true}, nil
}

func (f *Finalizer) remove(ctx context.Context, obj client.Object) error {
	orig := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, f.Name) {
		return nil
	}
	// Optimistic lock: never drop another controller's finalizer added meanwhile.
	if err := f.Client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("removing finalizer %s: %w", f.Name, err))
	}
	return nil
}

// All is a Cleanup.Run made of steps, each run on every call (a step not
// done yet does not hold the others back); done when every step is. The
// first error ends the call.
func All(steps ...func(ctx context.Context) (bool, error)) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		all := true
		for _, step := range steps {
			done, err := step(ctx)
			if err != nil {
				return false, err
			}
			all = all && done
		}
		return all, nil
	}
}
