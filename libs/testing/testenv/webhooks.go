package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TakeWebhooks deletes the Cairn webhook configurations installed in the
// test API server and returns them, ready to be created again.
func TakeWebhooks(t *testing.T, c client.Client) []client.Object {
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

// ApplyYAML creates every object of a multi-document YAML file.
func ApplyYAML(t *testing.T, c client.Client, path string) {
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

// FieldDiff lists every field (by JSON path) whose value differs between a
// and b, both of which must marshal to JSON objects.
func FieldDiff(path string, a, b any) []string {
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
