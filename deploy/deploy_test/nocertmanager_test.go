package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// withoutCertManager is the overlay docs/install.md gives for clusters
// without cert-manager (PLATFORM is the path of platform/).
const withoutCertManager = `resources:
- PLATFORM
patches:
- target: {group: cert-manager.io}
  patch: |-
    $patch: delete
    apiVersion: cert-manager.io/v1
    kind: Any
    metadata:
      name: any
- target: {kind: ValidatingWebhookConfiguration|MutatingWebhookConfiguration}
  patch: |-
    - op: remove
      path: /metadata/annotations/cert-manager.io~1inject-ca-from
    - op: add
      path: /webhooks/0/clientConfig/caBundle
      value: Q0E=
- target: {kind: CustomResourceDefinition, name: backupjobs.backup.cairn.dev}
  patch: |-
    - op: remove
      path: /metadata/annotations/cert-manager.io~1inject-ca-from
    - op: add
      path: /spec/conversion/webhook/clientConfig/caBundle
      value: Q0E=
`

// TestWithoutCertManager builds the documented overlay: no cert-manager
// object or annotation is left, every webhook has the CA bundle, and the
// managers still mount the Secrets the user provides.
func TestWithoutCertManager(t *testing.T) {
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(root(t), "platform"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(strings.ReplaceAll(withoutCertManager, "PLATFORM", rel)), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "- target: {group: cert-manager.io}") {
		t.Error("docs/install.md no longer shows the overlay this test builds")
	}
	objs := build(t, dir)
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("%s %s is left", o.GetKind(), o.GetName())
		}
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s %s keeps the cert-manager annotation", o.GetKind(), o.GetName())
		}
	}
	n := 0
	for _, o := range ofKind(objs, "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration") {
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			n++
			if ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); ca != "Q0E=" {
				t.Errorf("%s: a webhook has no CA bundle", o.GetName())
			}
		}
	}
	if n == 0 {
		t.Fatal("no webhooks")
	}
	crd := find(t, objs, "CustomResourceDefinition", "backupjobs.backup.cairn.dev")
	if ca, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle"); ca != "Q0E=" {
		t.Error("the conversion webhook has no CA bundle")
	}
	if len(ofKind(objs, "Deployment")) != len(operators) {
		t.Error("the overlay lost a Deployment")
	}
}
