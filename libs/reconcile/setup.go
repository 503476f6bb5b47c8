package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"cairn.dev/libs/access"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/references"
	"cairn.dev/libs/status"
)

// Setup is how every controller's SetupWithManager begins: b's defaults
// for the controller of kind (Init, with the kind's CleanupDeadline) and the
// settings' (each one's Init), then the
// skeleton of kind (its descriptor: the kind's name, its cleanup
// finalizer, its API defaults) with b's client, recorder, deadline and
// clock. The controller sets the skeleton's Begin, Final, Validate, Steps,
// Summarize, Cleanup and the rest,
// then registers it with Complete, which fails first with what Setup
// found (no client, no Guard, a setting's error): the controller does not
// start.
func Setup[T Object, S any](mgr ctrl.Manager, b *Base, kind access.Kind[T], settings ...Settings) *Reconciler[T, S] {
	name := kind.GroupKind.Kind
	err := b.Init(mgr, name, kind.CleanupDeadline)
	for _, s := range settings {
		if err == nil {
			err = s.Init(name)
		}
	}
	return &Reconciler[T, S]{Kind: name, Client: b.Client, Recorder: b.Recorder, New: newObject[T], Defaults: kind.Defaults,
		Finalizer: &finalizer.Finalizer{Name: kind.Finalizer, Deadline: b.CleanupDeadline,
			PollInterval: 2 * time.Second, Client: b.Client, Recorder: b.Recorder, Now: b.Now}, setupErr: err}
}

// Settings is what a controller embeds besides Base and hands to Setup,
// which initialises it too (e.g. agentjob.Agent): Init fails on what the
// controller cannot start without and fills the defaults.
type Settings interface {
	Init(kind string) error
}

// newObject is an empty object of T (a pointer to a struct).
func newObject[T Object]() T {
	return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
}

// Wiring is what a Watch adds to: the controller's builder, its manager
// and options (for a controller registered alongside, e.g. a hold's
// releaser), an object of the kind it reconciles and the kind's list (for
// the referrers' lookups), and the controller's client.
type Wiring struct {
	Ctx     context.Context
	Manager ctrl.Manager
	Options controller.Options
	Builder *builder.Builder
	For     client.Object
	List    client.ObjectList
	Client  client.Client
}

// A Watch adds to a controller what it watches besides its own kind.
type Watch func(w *Wiring) error

// Complete registers r with mgr as the controller of its kind, named after
// it in lower case ("restorejob"): For the kind (status-only updates
// ignored: the skeleton writes status itself), with opts, and what
// watches add, in order.
func (r *Reconciler[T, S]) Complete(ctx context.Context, mgr ctrl.Manager, opts controller.Options, watches ...Watch) error {
	if r.setupErr != nil {
		return r.setupErr
	}
	obj := r.New()
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("%s controller: %w", r.Kind, err)
	}
	list, err := mgr.GetScheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return fmt.Errorf("%s controller: %w", r.Kind, err)
	}
	w := &Wiring{Ctx: ctx, Manager: mgr, Options: opts, For: obj, List: list.(client.ObjectList), Client: r.Client,
		Builder: ctrl.NewControllerManagedBy(mgr).Named(strings.ToLower(r.Kind)).WithOptions(opts).
			For(obj, builder.WithPredicates(status.IgnoreStatusUpdates()))}
	for _, watch := range watches {
		if err := watch(w); err != nil {
			return err
		}
	}
	return w.Builder.Complete(r)
}

// Owns: the kind controls objects of obj's kind; their events go to their
// one controller.
func Owns(obj client.Object, opts ...builder.OwnsOption) Watch {
	return func(w *Wiring) error {
		w.Builder.Owns(obj, opts...)
		return nil
	}
}

// Watches: obj's kind's events go through h.
func Watches(obj client.Object, h handler.EventHandler, opts ...builder.WatchesOption) Watch {
	return func(w *Wiring) error {
		w.Builder.Watches(obj, h, opts...)
		return nil
	}
}

// Referrers indexes what each object of the kind refers to (refs, under
// references.IndexField, ownership.IndexReferences) and watches the
// referenced kinds (references.Secret, PVC, ConfigMap) as metadata only:
// an event of one wakes exactly the objects that refer to it and that
// keep keeps (nil: all).
func Referrers(refs func(client.Object) []ownership.Reference, keep func(client.Object) bool, kinds ...string) Watch {
	return func(w *Wiring) error {
		if err := ownership.IndexReferences(w.Ctx, w.Manager.GetFieldIndexer(), w.For, references.IndexField, refs); err != nil {
			return err
		}
		for _, kind := range kinds {
			if err := ReferrersOf(references.Metadata(kind), keep, builder.OnlyMetadata)(w); err != nil {
				return err
			}
		}
		return nil
	}
}

// ReferrersOf watches obj's kind: an event of one wakes the objects that
// refer to it by the index Referrers registers and that keep keeps (nil:
// all).
func ReferrersOf(obj client.Object, keep func(client.Object) bool, opts ...builder.WatchesOption) Watch {
	return func(w *Wiring) error {
		gvk, err := apiutil.GVKForObject(obj, w.Manager.GetScheme())
		if err != nil {
			return err
		}
		w.Builder.Watches(obj, ownership.EnqueueReferrers(w.Client, references.IndexField, w.List, gvk.GroupKind(), keeps(keep)...), opts...)
		return nil
	}
}

// ReferrersInNamespace is Referrers without an index, for a kind whose
// references all lie in its own namespace: an event of a referenced object
// scans that namespace's cached objects of the kind
// (ownership.EnqueueReferrersInNamespace).
func ReferrersInNamespace(refs func(client.Object) []ownership.Reference, kinds ...string) Watch {
	return func(w *Wiring) error {
		for _, kind := range kinds {
			w.Builder.Watches(references.Metadata(kind), ownership.EnqueueReferrersInNamespace(w.Client, w.List, references.GroupKind(kind), refs), builder.OnlyMetadata)
		}
		return nil
	}
}

func keeps(keep func(client.Object) bool) []func(client.Object) bool {
	if keep == nil {
		return nil
	}
	return []func(client.Object) bool{keep}
}
