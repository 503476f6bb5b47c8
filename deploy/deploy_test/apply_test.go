package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/hack/release"
)

const fieldManager = "cairn-deploy-test"

// notInstalled are kinds whose CRDs the test API server does not have
// (cert-manager, prometheus-operator); tests check them by parsing.
var notInstalled = map[string]bool{"Certificate": true, "Issuer": true, "ServiceMonitor": true, "PrometheusRule": true}

// apply installs objs the way `kubectl apply --server-side` would: CRDs first
// (waiting until they are Established), then the samples if any (before the
// webhook configurations, whose webhook server does not run here), then
// everything else. Kinds in notInstalled are returned, not applied.
func apply(t *testing.T, objs []*unstructured.Unstructured, samples []*unstructured.Unstructured) (skipped []*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "CustomResourceDefinition":
			crds = append(crds, o)
		case notInstalled[o.GetKind()]:
			skipped = append(skipped, o)
		default:
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		ssa(ctx, t, o)
	}
	for _, o := range crds {
		waitEstablished(ctx, t, o.GetName())
	}
	// Namespaces first, so namespaced objects find theirs.
	for _, o := range rest {
		if o.GetKind() == "Namespace" {
			ssa(ctx, t, o)
		}
	}
	for _, o := range samples {
		ssa(ctx, t, o)
	}
	for _, o := range rest {
		if o.GetKind() != "Namespace" {
			ssa(ctx, t, o)
		}
	}
	return skipped
}

func ssa(ctx context.Context, t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	obj := o.DeepCopy()
	if err := env.Client.Patch(ctx, obj, client.Apply, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		t.Errorf("server-side apply of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
}

func waitEstablished(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not Established: %v", name, err)
	}
}

// samples reads every manifest in platform/samples.
func samples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "platform", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			if o := fromYAML(t, []byte(doc)); o != nil {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// TestInstallIsAccepted applies what a user installs to a real API server:
// the platform with the samples (first: the webhook server does not run
// here, and the samples must reach the API server before the webhook
// configurations exist), then each operator's release manifest on its own,
// then the platform with every optional component. Only cert-manager
// and prometheus-operator kinds are left out (their CRDs are not installed);
// they are checked by TestCertManager and TestMonitoring.
func TestInstallIsAccepted(t *testing.T) {
	smp := samples(t)
	if len(ofKind(smp, "BackupJob")) == 0 {
		t.Fatal("platform/samples has no BackupJob")
	}
	skipped := apply(t, build(t, "platform"), smp)
	assertOnly(t, "platform", skipped, "Certificate", "Issuer")

	ctx := context.Background()
	var bj unstructured.Unstructured
	bj.SetAPIVersion("backup.cairn.dev/v1")
	bj.SetKind("BackupJob")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "orders-db"}, &bj); err != nil {
		t.Fatalf("sample BackupJob orders-db was not stored: %v", err)
	}

	for _, op := range operators {
		out, err := release.Render(root(t), op, "v0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		objs := decode(t, out)
		skipped = apply(t, objs, nil)
		assertOnly(t, "release "+op, skipped, "Certificate", "Issuer")
	}

	withComponents := build(t, overlay(t, []string{"platform"},
		[]string{"platform/components/monitoring", "platform/components/network-policy"}))
	skipped = apply(t, withComponents, nil)
	assertOnly(t, "platform+components", skipped, "Certificate", "Issuer", "ServiceMonitor", "PrometheusRule")

	// The API server's own PodSecurity admission (cairn-system enforces
	// restricted) accepts a pod made from each manager's template.
	for _, d := range ofKind(build(t, "platform"), "Deployment") {
		tpl, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
		var pod corev1.Pod
		into(t, &unstructured.Unstructured{Object: tpl}, &struct {
			Metadata *metav1.ObjectMeta `json:"metadata"`
			Spec     *corev1.PodSpec    `json:"spec"`
		}{&pod.ObjectMeta, &pod.Spec})
		pod.Name, pod.Namespace = d.GetName()+"-psa-probe", d.GetNamespace()
		if err := env.Client.Create(ctx, &pod, client.DryRunAll); err != nil {
			t.Errorf("a pod of Deployment %s is rejected in %s: %v", d.GetName(), d.GetNamespace(), err)
		}
	}
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if o := fromYAML(t, []byte(doc)); o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// assertOnly fails unless every skipped object is of one of kinds.
func assertOnly(t *testing.T, what string, skipped []*unstructured.Unstructured, kinds ...string) {
	t.Helper()
	for _, o := range skipped {
		ok := false
		for _, k := range kinds {
			ok = ok || o.GetKind() == k
		}
		if !ok {
			t.Errorf("%s: %s %s was not applied", what, o.GetKind(), o.GetName())
		}
	}
}
