package webhook

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

// TestDefaultsWithoutWebhooks: a RestoreJob created while no Cairn webhook is
// installed (an install run with --enable-webhooks=false, or the operator
// down) is stored with the same spec, field by field, as one created through
// the defaulting webhook — and both equal the API's defaults
// (restorev1.RestoreJobSpec.SetDefaults). The API server applies them itself:
// the CRD's +kubebuilder:default markers, and the port from the deploy base's
// MutatingAdmissionPolicy.
func TestDefaultsWithoutWebhooks(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := testenv.ForOperator(manager.Operator{Name: "restore",
		AddToScheme: []func(*runtime.Scheme) error{restorev1.AddToScheme, backupv1.AddToScheme}}, "restore", "backup")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, opts)
	env.ServeWebhooks(t, "cairn-restore-approval-key", Setup)
	ctx := t.Context()
	c := env.Client
	ns, err := env.Namespace(ctx, "defaults")
	if err != nil {
		t.Fatal(err)
	}
	testenv.ApplyYAML(t, c, filepath.Join(root, "deploy", "restore", "admission", "port_default.yaml"))

	restoreJob := func(name string, engine cairnv1.DatabaseEngine) *restorev1.RestoreJob {
		return &restorev1.RestoreJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: restorev1.RestoreJobSpec{
				Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}},
				Target: cairnv1.DatabaseRef{Engine: engine, Host: "scratch-db.shop.svc", Database: "orders",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"}},
			},
		}
	}
	testenv.CheckDefaults(t, testenv.Defaults[*restorev1.RestoreJob]{
		Client: c, Engines: []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine},
		New: restoreJob, Spec: func(rj *restorev1.RestoreJob) any { return rj.Spec },
		Want: func(t *testing.T, e cairnv1.DatabaseEngine) any {
			want := restoreJob("want", e).Spec
			want.SetDefaults()
			if want.Target.Port == 0 || want.MaxRetries == nil {
				t.Fatalf("%s: SetDefaults left fields empty: %+v", e, want)
			}
			return want
		},
		Ports:     func(rj *restorev1.RestoreJob) []int32 { return []int32{rj.Spec.Target.Port} },
		Finalizer: restorev1.CleanupFinalizer,
	})
}
