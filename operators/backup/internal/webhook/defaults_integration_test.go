package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testenv"
)

// TestDefaultsWithoutWebhooks: a BackupJob created while no Cairn webhook is
// installed (an install run with --enable-webhooks=false, or the operator
// down) is stored with the same spec, field by field, as one created through
// the defaulting webhook — and both equal the API's defaults
// (backupv1.BackupJobSpec.SetDefaults). The API server applies them itself:
// the CRD's +kubebuilder:default markers, and the port from the deploy base's
// MutatingAdmissionPolicy.
func TestDefaultsWithoutWebhooks(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, h.c, filepath.Join(root, "deploy", "backup", "admission", "port_default.yaml"))

	inputs := map[string]func(name string) *backupv1.BackupJob{
		"postgres": h.postgres,
		"mysql": func(name string) *backupv1.BackupJob {
			bj := h.postgres(name)
			bj.Spec.Database.Engine = cairnv1.MySQLEngine
			return bj
		},
	}

	// Without webhooks: remove the configurations envtest installed (kept
	// to put back), and wait until the API server neither calls the webhook
	// (no finalizer added) and applies the port policy.
	hooks := takeWebhooks(t, h.c)
	poll(t, 30*time.Second, "the API server to admit without webhooks, with the port policy", func() error {
		probe := h.postgres("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if len(probe.Finalizers) > 0 || probe.Spec.Database.Port == 0 {
			return fmt.Errorf("finalizers %q, port %d", probe.Finalizers, probe.Spec.Database.Port)
		}
		return nil
	})
	plain := map[string]*backupv1.BackupJob{}
	for engine, in := range inputs {
		bj := in("plain-" + engine)
		if err := h.c.Create(ctx, bj); err != nil {
			t.Fatalf("%s without webhooks: %v", engine, err)
		}
		plain[engine] = get(t, h.c, bj)
	}

	// Through the webhooks.
	for _, o := range hooks {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 30*time.Second, "the API server to call the webhooks again", func() error {
		probe := h.postgres("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if !slices.Contains(probe.Finalizers, backupv1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %q", probe.Finalizers)
		}
		return nil
	})
	for engine, in := range inputs {
		bj := in("hooked-" + engine)
		if err := h.c.Create(ctx, bj); err != nil {
			t.Fatalf("%s through the webhooks: %v", engine, err)
		}
		hooked := get(t, h.c, bj)

		want := in("want").Spec
		want.SetDefaults()
		for _, d := range fieldDiff("spec", plain[engine].Spec, hooked.Spec) {
			t.Errorf("%s: without webhooks vs through them: %s", engine, d)
		}
		for _, d := range fieldDiff("spec", want, plain[engine].Spec) {
			t.Errorf("%s: API defaults vs without webhooks: %s", engine, d)
		}
		if want.Database.Port == 0 || want.TimeZone == "" {
			t.Fatalf("%s: SetDefaults left fields empty: %+v", engine, want)
		}
	}
}

// takeWebhooks deletes the Cairn webhook configurations installed in the
// test API server and returns them, ready to be created again.
func takeWebhooks(t *testing.T, c client.Client) []client.Object {
	t.Helper()
	ctx := t.Context()
	var out []client.Object
	var ms admissionregistrationv1.MutatingWebhookConfigurationList
	var vs admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &vs); err != nil {
		t.Fatal(err)
	}
	for i := range ms.Items {
		out = append(out, &ms.Items[i])
	}
	for i := range vs.Items {
		out = append(out, &vs.Items[i])
	}
	if len(out) == 0 {
		t.Fatal("no webhook configurations installed")
	}
	for _, o := range out {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetManagedFields(nil)
		o.SetCreationTimestamp(metav1.Time{})
	}
	return out
}

// applyYAML creates every object of a multi-document YAML file.
func applyYAML(t *testing.T, c client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) == 0 {
			continue
		}
		if err := c.Create(t.Context(), o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: creating %s %s: %v", path, o.GetKind(), o.GetName(), err)
		}
	}
}

func get(t *testing.T, c client.Client, bj *backupv1.BackupJob) *backupv1.BackupJob {
	t.Helper()
	got := &backupv1.BackupJob{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(bj), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// fieldDiff lists every field (by JSON path) whose value differs between a
// and b, both of which must marshal to JSON objects.
func fieldDiff(path string, a, b any) []string {
	toMap := func(v any) (map[string]any, error) {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		return m, json.Unmarshal(data, &m)
	}
	am, err := toMap(a)
	if err != nil {
		return []string{err.Error()}
	}
	bm, err := toMap(b)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	walkDiff(path, am, bm, &out)
	slices.Sort(out)
	return out
}

func walkDiff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			walkDiff(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: %v != %v", path, a, b))
	}
}
