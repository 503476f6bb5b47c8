package webhook

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestSetDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   backupv1.BackupJobSpec
		want backupv1.BackupJobSpec
	}{{
		name: "postgres, everything empty",
		in:   backupv1.BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine}},
		want: backupv1.BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 5432},
			TimeZone:      "UTC",
			RetentionDays: 7, MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}, {
		name: "mysql port",
		in:   backupv1.BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine}},
		want: backupv1.BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Port: 3306},
			TimeZone:      "UTC",
			RetentionDays: 7, MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}, {
		name: "unknown engine gets no port",
		in:   backupv1.BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: "oracle"}},
		want: backupv1.BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: "oracle"},
			TimeZone:      "UTC",
			RetentionDays: 7, MaxRetries: new(int32(3)), ActiveDeadlineSeconds: new(int64(3600)),
			DeletionPolicy: backupv1.DeletionPolicyRetain,
		},
	}, {
		name: "set values are kept, maxRetries 0 included",
		in: backupv1.BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 6543},
			TimeZone:      "Asia/Shanghai",
			RetentionDays: 30, MaxRetries: new(int32(0)), ActiveDeadlineSeconds: new(int64(7200)),
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
		want: backupv1.BackupJobSpec{
			Database:      cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Port: 6543},
			TimeZone:      "Asia/Shanghai",
			RetentionDays: 30, MaxRetries: new(int32(0)), ActiveDeadlineSeconds: new(int64(7200)),
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := &backupv1.BackupJob{Spec: tc.in}
			SetDefaults(bj)
			if !apiequality.Semantic.DeepEqual(tc.want, bj.Spec) {
				t.Errorf("(-want +got):\n%s", diff.Diff(tc.want, bj.Spec))
			}
		})
	}
}

func TestDefaulterFinalizer(t *testing.T) {
	withOp := func(op admissionv1.Operation) context.Context {
		return admission.NewContextWithRequest(context.Background(),
			admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}})
	}
	deleted := metav1.Now()
	cases := []struct {
		name       string
		ctx        context.Context
		finalizers []string
		deleting   bool
		want       []string
	}{
		{name: "create adds it", ctx: withOp(admissionv1.Create), want: []string{backupv1.CleanupFinalizer}},
		{name: "create keeps others", ctx: withOp(admissionv1.Create), finalizers: []string{"x.io/y"}, want: []string{"x.io/y", backupv1.CleanupFinalizer}},
		{name: "create does not duplicate", ctx: withOp(admissionv1.Create), finalizers: []string{backupv1.CleanupFinalizer}, want: []string{backupv1.CleanupFinalizer}},
		{name: "update leaves a removed finalizer removed", ctx: withOp(admissionv1.Update), want: nil},
		{name: "no admission request: defaults only", ctx: context.Background(), want: nil},
		{name: "never onto an object being deleted", ctx: withOp(admissionv1.Create), deleting: true, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Finalizers: slices.Clone(tc.finalizers)}}
			if tc.deleting {
				bj.DeletionTimestamp = &deleted
			}
			if err := (&Defaulter{}).Default(tc.ctx, bj); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(bj.Finalizers, tc.want) {
				t.Errorf("finalizers: got %q, want %q", bj.Finalizers, tc.want)
			}
			if bj.Spec.TimeZone != DefaultTimeZone {
				t.Errorf("defaults not applied: timeZone %q", bj.Spec.TimeZone)
			}
		})
	}
}
