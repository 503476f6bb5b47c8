package reconcile

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/references"
)

// Base is what every Cairn controller is given, and sets up the same way
// (Init). A controller embeds it; the operator fills it with NewBase.
type Base struct {
	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads past the cache (a Job just created, a Secret's data,
	// an object really gone).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	// Recorder emits an Event for every transition.
	Recorder events.EventRecorder
	// CleanupDeadline bounds the finalizer's cleanup after a deletion
	// request; zero is the controller's default.
	CleanupDeadline time.Duration
	// Clock tells the time; nil is the real clock.
	Clock clock.PassiveClock
	// Guard verifies that the admission webhook approved the object's
	// references (libs/access); nil means the one registered for the
	// manager, and none is an error.
	Guard *access.Guard
	// Refs checks that the objects a spec refers to exist (set by Init).
	Refs *references.Checker
}

// NewBase is the Base of a controller of mgr whose Events come from
// source (manager.Options.EventSource) and whose cleanup has deadline.
func NewBase(mgr ctrl.Manager, source string, deadline time.Duration) Base {
	return Base{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder(source), CleanupDeadline: deadline}
}

// Init fills b's defaults for the controller of kind: the manager's API
// reader, the real clock, the
// cleanup deadline (defaultDeadline when unset), the manager's Guard, the
// references checker. A controller without a Guard does not start.
func (b *Base) Init(mgr ctrl.Manager, kind string, defaultDeadline time.Duration) error {
	if b.Client == nil {
		return fmt.Errorf("%s controller: no client", kind)
	}
	if b.APIReader == nil {
		b.APIReader = mgr.GetAPIReader()
	}
	if b.Clock == nil {
		b.Clock = clock.RealClock{}
	}
	if b.CleanupDeadline <= 0 {
		b.CleanupDeadline = defaultDeadline
	}
	if b.Guard == nil {
		b.Guard = access.For(mgr)
	}
	if b.Guard == nil {
		return errors.New(kind + " controller: no access.Guard (the operator's Prepare registers it)")
	}
	b.Refs = &references.Checker{Metadata: b.Client, Live: b.APIReader}
	return nil
}

// Now is the time on b's clock.
func (b *Base) Now() time.Time { return b.Clock.Now() }

// Approved is nil when the admission webhook approved obj's references
// (libs/access: the signature over kind's checks), else Stalled
// ReferencesNotApproved naming what was not approved: the controller acts
// on nothing an object that skipped the webhook refers to.
func Approved[T client.Object](b *Base, kind access.Kind[T], obj T) error {
	checks := kind.Checks(obj)
	if b.Guard.Approver.Approved(obj, kind.GroupKind, checks) {
		return nil
	}
	return Stalled(cairnv1.ReferencesNotApprovedReason, "%s", access.NotApproved(obj, kind.GroupKind.Kind, checks))
}

// Valid is nil for no errs, else Stalled reason (InvalidSpec when empty)
// with every error: a spec the controller cannot act on.
func Valid(errs field.ErrorList, reason string) error {
	if len(errs) == 0 {
		return nil
	}
	if reason == "" {
		reason = cairnv1.InvalidSpecReason
	}
	return Stalled(reason, "the spec is invalid: %s", errs.ToAggregate().Error())
}
