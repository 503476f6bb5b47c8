package install

import (
	"encoding/base64"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/e2e/cluster"
)

// The local overlay changes only what the docs' no-cert-manager install
// changes and the local images: no cert-manager object or annotation, every
// webhook that calls an operator's Service trusts that operator's CA, each
// operator's image is the local one; every other object and field is the
// platform's own.
func TestOverlayChangesOnlyImagesAndWebhookCerts(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Manifests(filepath.Join(root, "platform"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certs, err := WebhookCerts(filepath.Join(dir, "certs"), OperatorNames(objs))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteOverlay(filepath.Join(dir, "overlay"), filepath.Join(root, "platform"), objs, certs); err != nil {
		t.Fatal(err)
	}
	got, err := Manifests(filepath.Join(dir, "overlay"))
	if err != nil {
		t.Fatal(err)
	}
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range got {
		byKey[key(o)] = o
	}
	svcOwner := webhookServices(objs)
	hooks, images := 0, 0
	for _, want := range objs {
		if strings.HasPrefix(want.GetAPIVersion(), "cert-manager.io/") {
			if _, ok := byKey[key(want)]; ok {
				t.Errorf("%s: still in the overlay", key(want))
			}
			continue
		}
		o, ok := byKey[key(want)]
		if !ok {
			t.Errorf("%s: missing from the overlay", key(want))
			continue
		}
		o, want = o.DeepCopy(), want.DeepCopy()
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s: keeps cert-manager's annotation", key(o))
		}
		// Take out what the overlay may change, checking it on the way.
		check := func(cc map[string]any) {
			if op, ok := serviceOwner(cc, svcOwner); ok {
				hooks++
				if cc["caBundle"] != base64.StdEncoding.EncodeToString(certs[op].CA) {
					t.Errorf("%s: a webhook of the %s operator without its CA", key(o), op)
				}
			}
			delete(cc, "caBundle")
		}
		for _, x := range []*unstructured.Unstructured{o, want} {
			a := x.GetAnnotations()
			delete(a, "cert-manager.io/inject-ca-from")
			x.SetAnnotations(a)
			if len(a) == 0 {
				x.SetAnnotations(nil)
			}
			switch x.GetKind() {
			case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				hs, _, _ := unstructured.NestedSlice(x.Object, "webhooks")
				for _, h := range hs {
					if x == o {
						check(h.(map[string]any)["clientConfig"].(map[string]any))
					} else {
						delete(h.(map[string]any)["clientConfig"].(map[string]any), "caBundle")
					}
				}
				_ = unstructured.SetNestedSlice(x.Object, hs, "webhooks")
			case "CustomResourceDefinition":
				if cc, ok, _ := unstructured.NestedMap(x.Object, "spec", "conversion", "webhook", "clientConfig"); ok {
					if x == o {
						check(cc)
					} else {
						delete(cc, "caBundle")
					}
					_ = unstructured.SetNestedMap(x.Object, cc, "spec", "conversion", "webhook", "clientConfig")
				}
			case "Deployment":
				cs, _, _ := unstructured.NestedSlice(x.Object, "spec", "template", "spec", "containers")
				c := cs[0].(map[string]any)
				if x == o {
					op := x.GetLabels()[OperatorLabel]
					if c["image"] != OperatorImage(op) {
						t.Errorf("%s: image %v, want %s", key(o), c["image"], OperatorImage(op))
					}
					images++
				}
				delete(c, "image")
				_ = unstructured.SetNestedSlice(x.Object, cs, "spec", "template", "spec", "containers")
			}
		}
		if !reflect.DeepEqual(o.Object, want.Object) {
			t.Errorf("%s: the overlay changes more than images and webhook certificates:\n got %v\nwant %v", key(o), o.Object, want.Object)
		}
	}
	if hooks == 0 || images != len(OperatorNames(objs)) {
		t.Errorf("checked %d webhooks and %d operator images", hooks, images)
	}
}
