// Package deploy_test checks the Cairn install manifests: every operator's
// kustomize base (deploy/<operator>), the platform overlay and its components
// (platform/), and the release rendering (hack/release). Manifests are built
// with kustomize's Go API and applied to a real kube-apiserver (libs/testing/testenv).
package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"cairn.dev/libs/testing/testenv"
)

// operators are the operators the platform installs, in its order: the
// resources of platform/kustomization.yaml that are ../deploy/<name>. That
// list is the one place an operator is added (the Makefile finds operators/
// and deploy/ folders itself); TestEveryBaseIsInstalled fails for a base it
// leaves out.
var operators []string

var env *testenv.Env

func TestMain(m *testing.M) {
	ops, err := platformOperators()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	operators = ops
	testenv.Main(m, testenv.Options{}, &env)
}

// platformOperators reads the operators' bases from the platform overlay.
func platformOperators() ([]string, error) {
	r, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(r, "platform", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("platform/kustomization.yaml: %w", err)
	}
	var ops []string
	for _, res := range k.Resources {
		if op, ok := strings.CutPrefix(filepath.ToSlash(filepath.Clean(res)), "../deploy/"); ok {
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("platform/kustomization.yaml installs no operator base (../deploy/<name>)")
	}
	return ops, nil
}

// root is the repository root (the folder holding go.work).
func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// build runs kustomize on dir (relative to the repository root, or absolute)
// and returns the objects.
func build(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root(t), dir)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return objs
}

// overlay writes a kustomization in a temporary folder that takes
// resources and components (paths relative to the repository root) and
// returns the folder.
func overlay(t testing.TB, resources, components []string) string {
	t.Helper()
	dir := t.TempDir()
	rel := func(ps []string) []string {
		var out []string
		for _, p := range ps {
			r, err := filepath.Rel(dir, filepath.Join(root(t), p))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, filepath.ToSlash(r))
		}
		return out
	}
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  rel(resources),
		"components": rel(components),
	}
	data, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// allBuilds are the kustomizations every test looks at: each base, the
// platform, and the platform with every optional component.
func allBuilds(t testing.TB) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{"platform": build(t, "platform")}
	for _, op := range operators {
		out["deploy/"+op] = build(t, filepath.Join("deploy", op))
	}
	out["platform+components"] = build(t, overlay(t, []string{"platform"},
		[]string{"platform/components/monitoring", "platform/components/network-policy"}))
	return out
}

func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(kinds, o.GetKind()) {
			out = append(out, o)
		}
	}
	return out
}

func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

// fromYAML decodes one YAML document into an object; nil for an empty one.
func fromYAML(t testing.TB, doc []byte) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(data)); s == "null" || s == "{}" {
		return nil
	}
	o := &unstructured.Unstructured{}
	if err := o.UnmarshalJSON(data); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return o
}

// into converts an unstructured object into a typed one, rejecting unknown fields.
func into(t testing.TB, o *unstructured.Unstructured, typed any) {
	t.Helper()
	data, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, typed); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
