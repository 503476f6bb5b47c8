package v1alpha1_test

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/apis/backup/v1alpha1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

const fuzzIterations = 5000

func newFiller(t *testing.T, seed int64) *randfill.Filler {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := backupv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	t.Logf("fuzz seed %d", seed)
	return fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(scheme)).NumElements(0, 3)
}

// overWire sends obj through JSON into out, as the conversion webhook's
// request and response do.
func overWire(t *testing.T, obj, out any) {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}

// v1 → v1alpha1 → v1 keeps every v1 field.
func TestConvertHubSpokeHubIsLossless(t *testing.T) {
	f := newFiller(t, rand.Int63())
	for i := 0; i < fuzzIterations; i++ {
		hub := &backupv1.BackupJob{}
		f.Fill(hub)
		hubBefore := hub.DeepCopy()

		spoke := &v1alpha1.BackupJob{}
		if err := spoke.ConvertFrom(hub); err != nil {
			t.Fatalf("iteration %d: ConvertFrom: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(hubBefore, hub) {
			t.Fatalf("iteration %d: ConvertFrom changed its source:\n%s", i, diff.Diff(hubBefore, hub))
		}
		if _, ok := spoke.Annotations[v1alpha1.V1FieldsAnnotation]; !ok {
			t.Fatalf("iteration %d: ConvertFrom wrote no %s annotation", i, v1alpha1.V1FieldsAnnotation)
		}
		wired := &v1alpha1.BackupJob{}
		overWire(t, spoke, wired)

		got := &backupv1.BackupJob{}
		if err := wired.ConvertTo(got); err != nil {
			t.Fatalf("iteration %d: ConvertTo: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(hubBefore, got) {
			t.Fatalf("iteration %d: v1 → v1alpha1 → v1 lost data (-before +after):\n%s", i, diff.Diff(hubBefore, got))
		}
	}
}

// v1alpha1 → v1 → v1alpha1 keeps every v1alpha1 field; the only addition is
// the V1FieldsAnnotation that carries the v1 fields.
func TestConvertSpokeHubSpokeIsLossless(t *testing.T) {
	f := newFiller(t, rand.Int63())
	for i := 0; i < fuzzIterations; i++ {
		spoke := &v1alpha1.BackupJob{}
		f.Fill(spoke)
		spokeBefore := spoke.DeepCopy()

		hub := &backupv1.BackupJob{}
		if err := spoke.ConvertTo(hub); err != nil {
			t.Fatalf("iteration %d: ConvertTo: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(spokeBefore, spoke) {
			t.Fatalf("iteration %d: ConvertTo changed its source:\n%s", i, diff.Diff(spokeBefore, spoke))
		}
		wired := &backupv1.BackupJob{}
		overWire(t, hub, wired)

		got := &v1alpha1.BackupJob{}
		if err := got.ConvertFrom(wired); err != nil {
			t.Fatalf("iteration %d: ConvertFrom: %v", i, err)
		}
		if _, ok := got.Annotations[v1alpha1.V1FieldsAnnotation]; !ok {
			t.Fatalf("iteration %d: ConvertFrom wrote no %s annotation", i, v1alpha1.V1FieldsAnnotation)
		}
		delete(got.Annotations, v1alpha1.V1FieldsAnnotation)
		if !apiequality.Semantic.DeepEqual(spokeBefore, got) {
			t.Fatalf("iteration %d: v1alpha1 → v1 → v1alpha1 lost data (-before +after):\n%s", i, diff.Diff(spokeBefore, got))
		}

		// And once more through the annotation: v1alpha1 (annotated) → v1 is stable.
		again := &backupv1.BackupJob{}
		gotAnnotated := &v1alpha1.BackupJob{}
		if err := gotAnnotated.ConvertFrom(wired); err != nil {
			t.Fatal(err)
		}
		if err := gotAnnotated.ConvertTo(again); err != nil {
			t.Fatalf("iteration %d: ConvertTo (annotated): %v", i, err)
		}
		// A legacy-shape object is marked for the defaulting webhook; its
		// annotated form is not.
		if wired.Annotations[v1alpha1.LegacyShapeAnnotation] != "true" {
			t.Fatalf("iteration %d: ConvertTo of an unannotated object did not set %s", i, v1alpha1.LegacyShapeAnnotation)
		}
		if _, ok := again.Annotations[v1alpha1.LegacyShapeAnnotation]; ok {
			t.Fatalf("iteration %d: ConvertTo of an annotated object set %s", i, v1alpha1.LegacyShapeAnnotation)
		}
		delete(wired.Annotations, v1alpha1.LegacyShapeAnnotation)
		if len(wired.Annotations) == 0 {
			wired.Annotations = nil
		}
		if !apiequality.Semantic.DeepEqual(wired, again) {
			t.Fatalf("iteration %d: v1 → v1alpha1 → v1 of a converted object changed it:\n%s", i, diff.Diff(wired, again))
		}
	}
}

func nightlyHub() *backupv1.BackupJob {
	port := int32(5433)
	deadline := int64(1800)
	retries := int32(3)
	last := metav1.Unix(1767322800, 0)
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop", Annotations: map[string]string{"team": "db"}},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{
				Engine: cairnv1.PostgresEngine, Host: "pg.shop.svc", Port: port, Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "pg-backup"},
			},
			Schedule:              "0 2 * * *",
			TimeZone:              "Asia/Shanghai",
			RetentionDays:         7,
			MaxRetries:            &retries,
			ActiveDeadlineSeconds: &deadline,
			Storage:               cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}},
			DeletionPolicy:        backupv1.DeletionPolicyRetain,
		},
		Status: backupv1.BackupJobStatus{
			ObservedGeneration:  2,
			Phase:               backupv1.PhaseSucceeded,
			LastBackupTime:      &last,
			LastSuccessfulTime:  &last,
			LastResult:          backupv1.RunSucceeded,
			ConsecutiveFailures: 0,
		},
	}
}

// The annotation holds only what v1alpha1 lacks, so nobody edits a copy of
// schedule or host that is ignored.
func TestConvertFromAnnotationHoldsOnlyV1Fields(t *testing.T) {
	spoke := &v1alpha1.BackupJob{}
	if err := spoke.ConvertFrom(nightlyHub()); err != nil {
		t.Fatal(err)
	}
	want := `{"spec":{"activeDeadlineSeconds":1800,"database":{"credentialsSecretRef":{"name":"pg-backup"},"database":"orders","engine":"postgres","port":5433},"deletionPolicy":"Retain","storage":{"pvc":{"claimName":"backups"}},"timeZone":"Asia/Shanghai"},"status":{"lastResult":"Succeeded","lastSuccessfulTime":"2026-01-02T03:00:00Z"}}`
	if got := spoke.Annotations[v1alpha1.V1FieldsAnnotation]; got != want {
		t.Errorf("annotation %s:\n got %s\nwant %s", v1alpha1.V1FieldsAnnotation, got, want)
	}
	if spoke.Annotations["team"] != "db" {
		t.Errorf("other annotations: got %v, want team=db kept", spoke.Annotations)
	}
	wantSpec := v1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "0 2 * * *", RetentionDays: 7, MaxRetries: new(int32(3))}
	if !apiequality.Semantic.DeepEqual(spoke.Spec, wantSpec) {
		t.Errorf("spec:\n%s", diff.Diff(wantSpec, spoke.Spec))
	}
	if spoke.Status.Phase != "Succeeded" || spoke.Status.ObservedGeneration != 2 || spoke.Status.LastBackupTime == nil {
		t.Errorf("status: got %+v", spoke.Status)
	}
}

// The v1alpha1 fields win over the annotation, so a v1alpha1 client's edits count.
func TestConvertToV1alpha1FieldsWinOverAnnotation(t *testing.T) {
	spoke := &v1alpha1.BackupJob{}
	if err := spoke.ConvertFrom(nightlyHub()); err != nil {
		t.Fatal(err)
	}
	spoke.Spec.DatabaseHost = "pg-replica.shop.svc"
	spoke.Spec.Schedule = "30 3 * * *"
	spoke.Spec.MaxRetries = nil

	hub := &backupv1.BackupJob{}
	if err := spoke.ConvertTo(hub); err != nil {
		t.Fatal(err)
	}
	want := nightlyHub()
	want.Spec.Database.Host = "pg-replica.shop.svc"
	want.Spec.Schedule = "30 3 * * *"
	want.Spec.MaxRetries = nil
	if !apiequality.Semantic.DeepEqual(want, hub) {
		t.Errorf("(-want +got):\n%s", diff.Diff(want, hub))
	}
}

func TestConvertToLegacyDefaults(t *testing.T) {
	cases := []struct {
		name, meta, generateName string
		wantSecret, wantClaim    string
	}{
		{name: "named", meta: "nightly", wantSecret: "nightly-credentials", wantClaim: "nightly-backups"},
		{name: "generated name not yet set", generateName: "nightly-", wantSecret: "nightly-credentials", wantClaim: "nightly-backups"},
		{name: "no name at all"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spoke := &v1alpha1.BackupJob{
				ObjectMeta: metav1.ObjectMeta{Name: tc.meta, GenerateName: tc.generateName},
				Spec:       v1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "0 2 * * *", RetentionDays: 7, MaxRetries: new(int32(3))},
			}
			hub := &backupv1.BackupJob{}
			if err := spoke.ConvertTo(hub); err != nil {
				t.Fatal(err)
			}
			want := backupv1.BackupJobSpec{
				Database: cairnv1.DatabaseRef{
					Engine: cairnv1.PostgresEngine, Host: "pg.shop.svc", Database: "postgres",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: tc.wantSecret},
				},
				Schedule: "0 2 * * *", RetentionDays: 7, MaxRetries: new(int32(3)),
			}
			if tc.wantClaim != "" {
				want.Storage.PVC = &cairnv1.PVCStorage{ClaimName: tc.wantClaim}
			}
			if !apiequality.Semantic.DeepEqual(want, hub.Spec) {
				t.Errorf("(-want +got):\n%s", diff.Diff(want, hub.Spec))
			}
		})
	}
}

func TestConvertToRejectsCorruptAnnotation(t *testing.T) {
	spoke := &v1alpha1.BackupJob{ObjectMeta: metav1.ObjectMeta{
		Name: "nightly", Namespace: "shop",
		Annotations: map[string]string{v1alpha1.V1FieldsAnnotation: `{"spec":`},
	}}
	err := spoke.ConvertTo(&backupv1.BackupJob{})
	if err == nil {
		t.Fatal("ConvertTo accepted a truncated annotation")
	}
	for _, want := range []string{"shop/nightly", v1alpha1.V1FieldsAnnotation, "remove the annotation"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A v1 object's own value for the reserved annotation never reaches v1alpha1
// readers, and the stored (hub) object never gets it from a v1alpha1 writer.
func TestAnnotationIsNeverStored(t *testing.T) {
	hub := nightlyHub()
	hub.Annotations[v1alpha1.V1FieldsAnnotation] = "stale"
	spoke := &v1alpha1.BackupJob{}
	if err := spoke.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if spoke.Annotations[v1alpha1.V1FieldsAnnotation] == "stale" {
		t.Error("ConvertFrom kept a stale annotation")
	}
	back := &backupv1.BackupJob{}
	if err := spoke.ConvertTo(back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[v1alpha1.V1FieldsAnnotation]; ok {
		t.Errorf("ConvertTo left %s on the hub", v1alpha1.V1FieldsAnnotation)
	}
}

// A replace by a legacy-shape v1alpha1 object, as the API server runs it:
// ConvertTo for the defaulting webhook, KeepV1Fields there, ConvertFrom of
// the webhook's result, the stored v1alpha1 status put back
// (PrepareForUpdate, in the request's version), ConvertTo for storage. Every
// v1 field of the stored object stays but the four v1alpha1 sets.
func TestKeepV1FieldsThroughTheAPIServersUpdatePath(t *testing.T) {
	f := newFiller(t, rand.Int63())
	for i := 0; i < fuzzIterations/10; i++ {
		stored := &backupv1.BackupJob{}
		f.Fill(stored)
		delete(stored.Annotations, v1alpha1.V1FieldsAnnotation)
		delete(stored.Annotations, v1alpha1.LegacyShapeAnnotation)
		storedAlpha := &v1alpha1.BackupJob{}
		if err := storedAlpha.ConvertFrom(stored.DeepCopy()); err != nil {
			t.Fatal(err)
		}

		manifest := &v1alpha1.BackupJob{
			ObjectMeta: *stored.ObjectMeta.DeepCopy(),
			Spec:       v1alpha1.BackupJobSpec{DatabaseHost: "pg.shop.svc", Schedule: "15 4 * * *", RetentionDays: 3},
		}
		webhookIn := &backupv1.BackupJob{}
		if err := manifest.ConvertTo(webhookIn); err != nil {
			t.Fatal(err)
		}
		if webhookIn.Annotations[v1alpha1.LegacyShapeAnnotation] != "true" {
			t.Fatalf("iteration %d: a manifest without %s is not marked legacy", i, v1alpha1.V1FieldsAnnotation)
		}
		old := &backupv1.BackupJob{}
		if err := storedAlpha.DeepCopy().ConvertTo(old); err != nil {
			t.Fatal(err)
		}
		v1alpha1.KeepV1Fields(webhookIn, old)

		afterAdmission := &v1alpha1.BackupJob{}
		if err := afterAdmission.ConvertFrom(webhookIn); err != nil {
			t.Fatal(err)
		}
		afterAdmission.Status = *storedAlpha.Status.DeepCopy()
		got := &backupv1.BackupJob{}
		if err := afterAdmission.ConvertTo(got); err != nil {
			t.Fatal(err)
		}

		want := stored.DeepCopy()
		want.Spec.Database.Host = "pg.shop.svc"
		want.Spec.Schedule = "15 4 * * *"
		want.Spec.RetentionDays = 3
		want.Spec.MaxRetries = nil
		if !apiequality.Semantic.DeepEqual(want.Spec, got.Spec) || !apiequality.Semantic.DeepEqual(want.Status, got.Status) {
			t.Fatalf("iteration %d: the replace changed v1-only fields:\n%s", i, diff.Diff(want, got))
		}
		if _, ok := got.Annotations[v1alpha1.LegacyShapeAnnotation]; ok {
			t.Fatalf("iteration %d: %s would be stored", i, v1alpha1.LegacyShapeAnnotation)
		}
	}
}
