package webhook

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	engines := []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine}

	hooks := testenv.TakeWebhooks(t, c)
	testenv.Poll(t, 30*time.Second, "the API server to admit without webhooks, with the port policy", func() error {
		probe := restoreJob("probe", cairnv1.PostgresEngine)
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if len(probe.Finalizers) > 0 || probe.Spec.Target.Port == 0 {
			return fmt.Errorf("finalizers %q, port %d", probe.Finalizers, probe.Spec.Target.Port)
		}
		return nil
	})
	plain := map[cairnv1.DatabaseEngine]*restorev1.RestoreJob{}
	for _, e := range engines {
		rj := restoreJob("plain-"+string(e), e)
		if err := c.Create(ctx, rj); err != nil {
			t.Fatalf("%s without webhooks: %v", e, err)
		}
		plain[e] = get(t, c, rj)
	}

	for _, o := range hooks {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Poll(t, 30*time.Second, "the API server to call the webhooks again", func() error {
		probe := restoreJob("probe", cairnv1.PostgresEngine)
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if !slices.Contains(probe.Finalizers, restorev1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %q", probe.Finalizers)
		}
		return nil
	})
	for _, e := range engines {
		rj := restoreJob("hooked-"+string(e), e)
		if err := c.Create(ctx, rj); err != nil {
			t.Fatalf("%s through the webhooks: %v", e, err)
		}
		hooked := get(t, c, rj)

		want := restoreJob("want", e).Spec
		want.SetDefaults()
		if want.Target.Port == 0 || want.MaxRetries == nil {
			t.Fatalf("%s: SetDefaults left fields empty: %+v", e, want)
		}
		for _, d := range testenv.FieldDiff("spec", plain[e].Spec, hooked.Spec) {
			t.Errorf("%s: without webhooks vs through them: %s", e, d)
		}
		for _, d := range testenv.FieldDiff("spec", want, plain[e].Spec) {
			t.Errorf("%s: API defaults vs without webhooks: %s", e, d)
		}
	}
}

func get(t *testing.T, c client.Client, rj *restorev1.RestoreJob) *restorev1.RestoreJob {
	t.Helper()
	got := &restorev1.RestoreJob{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(rj), got); err != nil {
		t.Fatal(err)
	}
	return got
}
