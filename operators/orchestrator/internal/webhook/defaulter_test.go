package webhook

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

func TestDefaulter(t *testing.T) {
	withOp := func(op admissionv1.Operation) context.Context {
		return admission.NewContextWithRequest(context.Background(),
			admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}})
	}
	deleted := metav1.Now()
	for _, tc := range []struct {
		name         string
		ctx          context.Context
		deleting     bool
		want         []string
		wantDefaults bool
	}{
		{name: "create adds the finalizer and defaults", ctx: withOp(admissionv1.Create), want: []string{platformv1.CleanupFinalizer}, wantDefaults: true},
		{name: "update defaults, adds no finalizer", ctx: withOp(admissionv1.Update), wantDefaults: true},
		{name: "no admission request changes nothing", ctx: context.Background()},
		{name: "an object being deleted is left alone", ctx: withOp(admissionv1.Update), deleting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec: platformv1.ProtectionPlanSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine}}}
			if tc.deleting {
				p.DeletionTimestamp = &deleted
			}
			if err := NewDefaulter(nil).Default(tc.ctx, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Finalizers, tc.want) {
				t.Errorf("finalizers %q, want %q", p.Finalizers, tc.want)
			}
			defaulted := p.Spec.TimeZone == "UTC" && p.Spec.Database.Port == 3306 && p.Spec.Verification.RestoreInto.Port == 3306
			if defaulted != tc.wantDefaults {
				t.Errorf("defaults applied: %v, want %v", defaulted, tc.wantDefaults)
			}
		})
	}
}
