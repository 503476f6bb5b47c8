package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

type harness struct {
	c        client.Client
	warnings *testenv.Warnings
	ns       string
	env      *testenv.Env
	scheme   *runtime.Scheme
	guard    *access.Guard
}

// startWebhooks starts kube-apiserver and etcd with the generated BackupJob
// CRD and webhook configurations, and a manager serving this package's
// webhooks (Setup) where the configurations point.
func startWebhooks(t *testing.T) *harness {
	t.Helper()
	opts, err := testenv.ForOperator(manager.Operator{Name: "backup",
		AddToScheme: []func(*runtime.Scheme) error{backupv1.AddToScheme, backupv1alpha1.AddToScheme}})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, opts)
	mgr := env.ServeWebhooks(t, "cairn-backup-approval-key", Setup)
	c, rec := env.WarningClient(t, nil)
	ns, err := env.Namespace(context.Background(), "webhook")
	if err != nil {
		t.Fatal(err)
	}
	return &harness{c: c, warnings: rec, ns: ns, env: env, scheme: env.Scheme, guard: access.For(mgr)}
}

func (h *harness) postgres(name string) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{
				Engine: cairnv1.PostgresEngine, Host: "pg.shop.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "pg-backup"},
			},
			Schedule: "0 2 * * *",
			Storage:  cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}},
		},
	}
}

// TestWebhooksAgainstAPIServer runs the webhooks behind a real kube-apiserver:
// what it admits, defaults, rejects and converts.
func TestWebhooksAgainstAPIServer(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()

	t.Run("defaults and finalizer on create", func(t *testing.T) {
		if err := h.c.Create(ctx, h.postgres("defaults")); err != nil {
			t.Fatal(err)
		}
		got := &backupv1.BackupJob{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "defaults"}, got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		// retentionDays has no default (it is one or the other with
		// retention): absent, the controller keeps 7 days.
		if s.TimeZone != "UTC" || s.RetentionDays != 0 || s.MaxRetries == nil || *s.MaxRetries != 3 ||
			s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds != 3600 ||
			s.DeletionPolicy != backupv1.DeletionPolicyRetain || s.Database.Port != 5432 {
			t.Errorf("defaults not applied: %+v", s)
		}
		if !slices.Contains(got.Finalizers, backupv1.CleanupFinalizer) {
			t.Errorf("finalizers %q: want %s", got.Finalizers, backupv1.CleanupFinalizer)
		}
	})

	t.Run("invalid objects are rejected with the field and the fix", func(t *testing.T) {
		const byWebhook, bySchema = true, false
		cases := []struct {
			name    string
			mutate  func(*backupv1.BackupJob)
			webhook bool // rejected by the validating webhook, not already by the CRD schema
			want    []string
		}{
			{"unknown time zone", func(b *backupv1.BackupJob) { b.Spec.TimeZone = "Mars/Olympus" }, byWebhook,
				[]string{"spec.timeZone", `unknown time zone "Mars/Olympus"`}},
			{"cron out of range", func(b *backupv1.BackupJob) { b.Spec.Schedule = "61 2 * * *" }, byWebhook,
				[]string{"spec.schedule", "not a valid cron schedule"}},
			{"port in the host", func(b *backupv1.BackupJob) { b.Spec.Database.Host = "pg.shop.svc:5432" }, byWebhook,
				[]string{"spec.database.host", "set the port in spec.database.port"}},
			{"CRON_TZ prefix", func(b *backupv1.BackupJob) { b.Spec.Schedule = "CRON_TZ=UTC 0 2 * * *" }, bySchema,
				[]string{"spec.schedule", "no CRON_TZ= prefix (set timeZone)"}},
			{"seconds field", func(b *backupv1.BackupJob) { b.Spec.Schedule = "0 0 2 * * *" }, bySchema,
				[]string{"spec.schedule", "no seconds field"}},
			{"both storage kinds", func(b *backupv1.BackupJob) {
				b.Spec.Storage.S3 = &cairnv1.S3Storage{Endpoint: "s3.example.com", Bucket: "shop", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
			}, bySchema, []string{"spec.storage", "set exactly one of pvc or s3"}},
			{"no storage", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC = nil }, bySchema,
				[]string{"spec.storage", "set exactly one of pvc or s3"}},
			{"retention below 1", func(b *backupv1.BackupJob) { b.Spec.RetentionDays = -1 }, bySchema,
				[]string{"spec.retentionDays", "greater than or equal to 1"}},
			{"retentionDays beside retention", func(b *backupv1.BackupJob) {
				b.Spec.RetentionDays = 7 // the value that was the default: still both
				b.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
			}, bySchema, []string{"spec", "set either retentionDays (the simple form) or retention (calendar tiers), not both"}},
			{"unknown engine", func(b *backupv1.BackupJob) { b.Spec.Database.Engine = "oracle" }, bySchema,
				[]string{"spec.database.engine", `supported values: "postgres", "mysql"`}},
			{"secret name not DNS-1123", func(b *backupv1.BackupJob) { b.Spec.Database.CredentialsSecretRef.Name = "PG_Secret" }, bySchema,
				[]string{"spec.database.credentialsSecretRef.name"}},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				bj := h.postgres(fmt.Sprintf("invalid-%d", i))
				tc.mutate(bj)
				err := h.c.Create(ctx, bj)
				if !apierrors.IsInvalid(err) {
					t.Fatalf("got %v, want an Invalid error", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if denied := strings.Contains(err.Error(), `admission webhook "vbackupjob.cairn.dev" denied the request`); denied != tc.webhook {
					t.Errorf("rejected by the webhook: %v, want %v (%v)", denied, tc.webhook, err)
				}
			})
		}
	})

	t.Run("updates are validated and warned about", func(t *testing.T) {
		if err := h.c.Create(ctx, h.postgres("update")); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKey{Namespace: h.ns, Name: "update"}
		bj := &backupv1.BackupJob{}
		if err := h.c.Get(ctx, key, bj); err != nil {
			t.Fatal(err)
		}
		bad := bj.DeepCopy()
		bad.Spec.TimeZone = "Mars/Olympus"
		if err := h.c.Update(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.timeZone") {
			t.Fatalf("update to an unknown time zone: got %v, want Invalid on spec.timeZone", err)
		}

		h.warnings.Take()
		bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
		if err := h.c.Update(ctx, bj); err != nil {
			t.Fatal(err)
		}
		if w := h.warnings.Take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "deletes all its stored backups") }) {
			t.Errorf("warnings %q: want the deletionPolicy Delete warning", w)
		}
		got := &backupv1.BackupJob{}
		if err := h.c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.TimeZone != "UTC" || got.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete {
			t.Errorf("stored spec: timeZone %q deletionPolicy %q, want UTC and Delete", got.Spec.TimeZone, got.Spec.DeletionPolicy)
		}
	})

	t.Run("v1alpha1 is served through conversion", func(t *testing.T) {
		testV1alpha1RoundTrip(t, h)
	})
}

// testV1alpha1RoundTrip: create as v1alpha1 → read as v1 → update as v1 →
// read as v1alpha1 → update as v1alpha1 → read as v1; nothing is lost.
func testV1alpha1RoundTrip(t *testing.T, h *harness) {
	ctx := t.Context()
	key := client.ObjectKey{Namespace: h.ns, Name: "legacy"}

	// A v1alpha1 object is checked like a v1 one: the webhooks see it as v1.
	bad := &backupv1alpha1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-bad", Namespace: h.ns},
		Spec:       backupv1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "61 2 * * *"},
	}
	if err := h.c.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedule") {
		t.Fatalf("v1alpha1 with a bad schedule: got %v, want Invalid on spec.schedule", err)
	}

	long := &backupv1alpha1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("n", 53), Namespace: h.ns},
		Spec:       backupv1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "0 2 * * *"},
	}
	if err := h.c.Create(ctx, long); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "at most 52 characters") {
		t.Fatalf("v1alpha1 with a 53-character name: got %v, want Invalid naming the 52-character limit", err)
	}

	// The article's object, in the original flat shape.
	h.warnings.Take()
	legacy := &backupv1alpha1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
		Spec: backupv1alpha1.BackupJobSpec{
			DatabaseHost: "pg.shop.svc", Schedule: "0 2 * * *", RetentionDays: 7, MaxRetries: new(int32(3)),
		},
	}
	if err := h.c.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if w := h.warnings.Take(); !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "v1alpha1 BackupJob is deprecated") }) {
		t.Errorf("warnings %q: want the v1alpha1 deprecation warning", w)
	}

	// Read as v1: legacy defaults, webhook defaults, finalizer.
	v1obj := &backupv1.BackupJob{}
	if err := h.c.Get(ctx, key, v1obj); err != nil {
		t.Fatal(err)
	}
	wantDB := cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "pg.shop.svc", Port: 5432, Database: "postgres",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "legacy-credentials"},
	}
	if v1obj.Spec.Database != wantDB {
		t.Errorf("v1 database: got %+v, want %+v", v1obj.Spec.Database, wantDB)
	}
	if pvc := v1obj.Spec.Storage.PVC; pvc == nil || pvc.ClaimName != "legacy-backups" || v1obj.Spec.Storage.S3 != nil {
		t.Errorf("v1 storage: got %+v, want pvc legacy-backups", v1obj.Spec.Storage)
	}
	if v1obj.Spec.TimeZone != "UTC" || v1obj.Spec.Schedule != "0 2 * * *" || v1obj.Spec.RetentionDays != 7 || *v1obj.Spec.MaxRetries != 3 {
		t.Errorf("v1 spec: %+v", v1obj.Spec)
	}
	if !slices.Contains(v1obj.Finalizers, backupv1.CleanupFinalizer) {
		t.Errorf("finalizers %q: want %s", v1obj.Finalizers, backupv1.CleanupFinalizer)
	}
	if _, ok := v1obj.Annotations[backupv1alpha1.V1FieldsAnnotation]; ok {
		t.Errorf("the stored object carries %s", backupv1alpha1.V1FieldsAnnotation)
	}

	// Update as v1: fields v1alpha1 cannot express, in spec and status.
	v1obj.Spec.Database.CredentialsSecretRef.Name = "pg-backup"
	v1obj.Spec.Database.Database = "orders"
	v1obj.Spec.TimeZone = "Asia/Shanghai"
	v1obj.Spec.Suspend = true
	v1obj.Spec.Storage = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "https://s3.example.com", Bucket: "shop-backups", Prefix: "prod/",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-backup"},
	}}
	if err := h.c.Update(ctx, v1obj); err != nil {
		t.Fatal(err)
	}
	finished := metav1.NewTime(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	v1obj.Status = backupv1.BackupJobStatus{
		ObservedGeneration: v1obj.Generation,
		Phase:              backupv1.PhaseSucceeded,
		LastBackupTime:     &finished,
		LastSuccessfulTime: &finished,
		LastResult:         backupv1.RunSucceeded,
		LastArtifact:       &cairnv1.Artifact{Path: "prod/legacy/2026-01-02.dump.gz", Size: 4096, Checksum: "sha256:00"},
	}
	if err := h.c.Status().Update(ctx, v1obj); err != nil {
		t.Fatal(err)
	}
	wantV1 := v1obj.DeepCopy()

	// Read as v1alpha1: its own fields, and the rest in the annotation.
	alpha := &backupv1alpha1.BackupJob{}
	if err := h.c.Get(ctx, key, alpha); err != nil {
		t.Fatal(err)
	}
	wantAlphaSpec := backupv1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "0 2 * * *", RetentionDays: 7, MaxRetries: new(int32(3))}
	if alpha.Spec.DatabaseHost != wantAlphaSpec.DatabaseHost || alpha.Spec.Schedule != wantAlphaSpec.Schedule ||
		alpha.Spec.RetentionDays != 7 || alpha.Spec.MaxRetries == nil || *alpha.Spec.MaxRetries != 3 {
		t.Errorf("v1alpha1 spec: got %+v, want %+v", alpha.Spec, wantAlphaSpec)
	}
	if alpha.Status.Phase != "Succeeded" || alpha.Status.LastBackupTime == nil || !alpha.Status.LastBackupTime.Equal(&finished) {
		t.Errorf("v1alpha1 status: %+v", alpha.Status)
	}
	var carried struct {
		Spec backupv1.BackupJobSpec `json:"spec"`
	}
	if err := json.Unmarshal([]byte(alpha.Annotations[backupv1alpha1.V1FieldsAnnotation]), &carried); err != nil {
		t.Fatalf("annotation %s: %v", backupv1alpha1.V1FieldsAnnotation, err)
	}
	if carried.Spec.TimeZone != "Asia/Shanghai" || carried.Spec.Storage.S3 == nil || !carried.Spec.Suspend {
		t.Errorf("annotation %s does not carry the v1 fields: %s", backupv1alpha1.V1FieldsAnnotation, alpha.Annotations[backupv1alpha1.V1FieldsAnnotation])
	}

	// An update as v1alpha1 that changes nothing changes nothing.
	if err := h.c.Update(ctx, alpha.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	same := &backupv1.BackupJob{}
	if err := h.c.Get(ctx, key, same); err != nil {
		t.Fatal(err)
	}
	if same.Generation != wantV1.Generation {
		t.Errorf("a no-op v1alpha1 update changed the spec: generation %d→%d", wantV1.Generation, same.Generation)
	}
	if diff := specStatusDiff(wantV1, same); diff != "" {
		t.Errorf("a no-op v1alpha1 update changed the object: %s", diff)
	}

	// Update as v1alpha1: its own fields change, the v1-only ones stay.
	alpha.Spec.DatabaseHost = "pg-replica.shop.svc"
	alpha.Spec.Schedule = "30 3 * * *"
	alpha.Spec.RetentionDays = 14
	if err := h.c.Update(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	alpha.Status.Phase = "Failed"
	if err := h.c.Status().Update(ctx, alpha); err != nil {
		t.Fatal(err)
	}

	got := &backupv1.BackupJob{}
	if err := h.c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	wantV1.Spec.Database.Host = "pg-replica.shop.svc"
	wantV1.Spec.Schedule = "30 3 * * *"
	wantV1.Spec.RetentionDays = 14
	wantV1.Status.Phase = backupv1.PhaseFailed
	if diff := specStatusDiff(wantV1, got); diff != "" {
		t.Errorf("v1 after the v1alpha1 updates: %s", diff)
	}
	if got.Generation != wantV1.Generation+1 {
		t.Errorf("generation: got %d, want %d (one spec change)", got.Generation, wantV1.Generation+1)
	}

	// And read as v1alpha1 once more.
	again := &backupv1alpha1.BackupJob{}
	if err := h.c.Get(ctx, key, again); err != nil {
		t.Fatal(err)
	}
	if again.Spec.Schedule != "30 3 * * *" || again.Spec.DatabaseHost != "pg-replica.shop.svc" || again.Status.Phase != "Failed" {
		t.Errorf("v1alpha1 after the updates: spec %+v status phase %q", again.Spec, again.Status.Phase)
	}

	// kubectl replace of the old manifest (the flat shape, no annotation;
	// not the object Create returned, which carries the annotation): its own
	// fields change, and the v1-only ones the stored object has, in spec
	// (database, credentials, time zone, suspend, S3 storage) and in status
	// (last successful time, result, artifact), stay instead of being reset
	// to the legacy defaults.
	old := &backupv1alpha1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, ResourceVersion: again.ResourceVersion},
		Spec: backupv1alpha1.BackupJobSpec{
			DatabaseHost: "pg.shop.svc", Schedule: "15 4 * * *", RetentionDays: 7, MaxRetries: new(int32(3)),
		},
	}
	if err := h.c.Update(ctx, old); err != nil {
		t.Fatal(err)
	}
	replaced := &backupv1.BackupJob{}
	if err := h.c.Get(ctx, key, replaced); err != nil {
		t.Fatal(err)
	}
	wantV1.Spec.Database.Host = "pg.shop.svc"
	wantV1.Spec.Schedule = "15 4 * * *"
	wantV1.Spec.RetentionDays = 7
	if diff := specStatusDiff(wantV1, replaced); diff != "" {
		t.Errorf("v1 after a replace by the old v1alpha1 manifest: %s", diff)
	}
	for _, a := range []string{backupv1alpha1.LegacyShapeAnnotation, backupv1alpha1.V1FieldsAnnotation} {
		if _, ok := replaced.Annotations[a]; ok {
			t.Errorf("the stored object carries %s", a)
		}
	}
}

// specStatusDiff says how got's spec and status differ from want's, "" when equal.
func specStatusDiff(want, got *backupv1.BackupJob) string {
	w, errW := json.Marshal(map[string]any{"spec": want.Spec, "status": want.Status})
	g, errG := json.Marshal(map[string]any{"spec": got.Spec, "status": got.Status})
	if err := errors.Join(errW, errG); err != nil {
		return err.Error()
	}
	if string(w) == string(g) {
		return ""
	}
	return fmt.Sprintf("\n got %s\nwant %s", g, w)
}
