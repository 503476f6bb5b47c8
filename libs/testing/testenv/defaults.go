package testenv

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Defaults is one kind's "the same without webhooks" check (CheckDefaults):
// an object created while no Cairn webhook is installed (an install run
// with --enable-webhooks=false, or the operator down) is stored with the
// same spec, field by field, as one created through the defaulting
// webhook, and both equal the API's defaults (the kind's SetDefaults). The
// API server applies them itself: the CRD's +kubebuilder:default markers
// and the deploy base's port MutatingAdmissionPolicy (applied by the test
// before).
type Defaults[T client.Object] struct {
	// Client creates and reads; the webhook configurations it sees are
	// taken away and put back (TakeWebhooks).
	Client client.Client
	// Engines are the engines an object is created of, each once without
	// and once through the webhooks.
	Engines []cairnv1.DatabaseEngine
	// New is an object of engine named name, as a user writes it.
	New func(name string, engine cairnv1.DatabaseEngine) T
	// Spec is an object's spec (compared field by field).
	Spec func(T) any
	// Want is New's spec with the API's defaults applied (SetDefaults); it
	// fails t when they leave a field empty that they must fill.
	Want func(t *testing.T, engine cairnv1.DatabaseEngine) any
	// Ports are an object's database ports: on a probe admitted without
	// webhooks, the port policy's work (every one set).
	Ports func(probe T) []int32
	// Finalizer is the cleanup finalizer the defaulting webhook adds.
	Finalizer string
	// WithoutWebhooks, when set, runs while no webhook is installed
	// (e.g. what the CRD alone must refuse).
	WithoutWebhooks func(t *testing.T)
}

// CheckDefaults runs d: objects of every engine created without webhooks,
// then through them, compared with each other and with the API's defaults.
func CheckDefaults[T client.Object](t *testing.T, d Defaults[T]) {
	t.Helper()
	ctx := t.Context()
	hooks := TakeWebhooks(t, d.Client)
	reinstalled := false
	reinstall := func() {
		if reinstalled {
			return
		}
		reinstalled = true
		for _, h := range hooks {
			if err := d.Client.Create(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(reinstall)
	probe := func(check func(T) error) func() error {
		return func() error {
			p := d.New("probe", d.Engines[0])
			if err := d.Client.Create(ctx, p, client.DryRunAll); err != nil {
				return err
			}
			return check(p)
		}
	}
	create := func(name string) map[cairnv1.DatabaseEngine]T {
		out := map[cairnv1.DatabaseEngine]T{}
		for _, e := range d.Engines {
			o := d.New(name+"-"+string(e), e)
			if err := d.Client.Create(ctx, o); err != nil {
				t.Fatalf("%s %s: %v", e, name, err)
			}
			if err := d.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				t.Fatal(err)
			}
			out[e] = o
		}
		return out
	}

	Poll(t, time.Minute, "the API server to admit without webhooks, with the port policy", probe(func(p T) error {
		if len(p.GetFinalizers()) > 0 {
			return fmt.Errorf("finalizers %q", p.GetFinalizers())
		}
		if ports := d.Ports(p); slices.Contains(ports, 0) {
			return fmt.Errorf("ports %v: the port policy has not set them all", ports)
		}
		return nil
	}))
	plain := create("plain")
	if d.WithoutWebhooks != nil {
		d.WithoutWebhooks(t)
	}
	reinstall()
	Poll(t, time.Minute, "the API server to call the webhooks again", probe(func(p T) error {
		if !slices.Contains(p.GetFinalizers(), d.Finalizer) {
			return fmt.Errorf("finalizers %q", p.GetFinalizers())
		}
		return nil
	}))
	hooked := create("hooked")
	for _, e := range d.Engines {
		for _, diff := range FieldDiff("spec", d.Spec(plain[e]), d.Spec(hooked[e])) {
			t.Errorf("%s: without webhooks vs through them: %s", e, diff)
		}
		for _, diff := range FieldDiff("spec", d.Want(t, e), d.Spec(plain[e])) {
			t.Errorf("%s: API defaults vs without webhooks: %s", e, diff)
		}
	}
}

// Refusal is an object admission must refuse: Mutate breaks a valid one,
// and Want is in the refusal's message.
type Refusal[T client.Object] struct {
	Name   string
	Mutate func(T)
	Want   string
}

// CheckRefused creates through c, for each refusal (a subtest), a valid
// object broken by its Mutate, and expects the create refused with its Want
// in the message: by the CRD's schema and rules, or by a validating
// webhook.
func CheckRefused[T client.Object](t *testing.T, c client.Client, valid func() T, refusals []Refusal[T]) {
	t.Helper()
	for _, r := range refusals {
		t.Run(r.Name, func(t *testing.T) {
			o := valid()
			r.Mutate(o)
			err := c.Create(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), r.Want) {
				t.Errorf("create: %v, want refused with %q", err, r.Want)
			}
		})
	}
}
