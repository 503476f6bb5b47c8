package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"cairn.dev/hack/release"
)

func TestVersionChecks(t *testing.T) {
	tags := []string{"operators/backup/v0.1.0", "operators/backup/v0.10.0", "operators/backup/v0.9.3",
		"operators/restore/v2.0.0", "agent/v5.0.0", "operators/backup/not-a-version"}
	if got := release.Latest(tags, "backup"); got != "v0.10.0" {
		t.Errorf("Latest(backup) = %s, want v0.10.0 (semver order, not string order)", got)
	}
	if got := release.Latest(tags, "migration"); got != "" {
		t.Errorf("Latest(migration) = %q", got)
	}
	for _, tc := range []struct {
		op, version string
		ok          bool
	}{
		{"backup", "v0.10.1", true},
		{"backup", "v1.0.0", true},
		{"backup", "v0.11.0-rc.1", true},
		{"backup", "v0.10.0", false},      // the last release
		{"backup", "v0.9.4", false},       // older
		{"backup", "v0.10.0-rc.1", false}, // a pre-release of the last release is older
		{"restore", "v1.5.0", false},      // restore's own last tag is v2.0.0
		{"restore", "v2.0.1", true},
		{"migration", "v0.1.0", true}, // no tag yet
		{"backup", "0.11.0", false},   // no leading v
		{"backup", "v0.11", false},
		{"backup", "v0.11.0+build", false},
		{"backup", "v01.2.3", false},
		{"backup", "latest", false},
	} {
		err := release.CheckVersion(tags, tc.op, tc.version)
		if (err == nil) != tc.ok {
			t.Errorf("CheckVersion(%s, %s) = %v, want ok=%v", tc.op, tc.version, err, tc.ok)
		}
	}
}

// TestReleaseChangesOnlyItsImageTag: two releases of one operator differ in
// that operator's image tag and nothing else; the manifest holds nothing of
// another operator; and releasing one operator leaves every other operator's
// release rendering untouched.
func TestReleaseChangesOnlyItsImageTag(t *testing.T) {
	r := root(t)
	before := map[string][]byte{}
	for _, op := range operators {
		out, err := release.Render(r, op, "v1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		before[op] = out
	}
	for _, op := range operators {
		v1, v2 := decode(t, before[op]), render(t, op, "v1.1.0")
		if len(v1) != len(v2) {
			t.Fatalf("%s: %d objects, then %d", op, len(v1), len(v2))
		}
		changed := 0
		for i := range v1 {
			a, b := v1[i], v2[i]
			if a.GetKind() == "Deployment" {
				if image(t, a) != "ghcr.io/cairn-dev/"+op+"-operator:v1.0.0" || image(t, b) != "ghcr.io/cairn-dev/"+op+"-operator:v1.1.0" {
					t.Errorf("%s: images %s, %s", op, image(t, a), image(t, b))
				}
				setImage(t, b, image(t, a))
				changed++
			}
			if !reflect.DeepEqual(a.Object, b.Object) {
				t.Errorf("%s: %s %s differs between v1.0.0 and v1.1.0 beyond the image tag", op, a.GetKind(), a.GetName())
			}
		}
		if changed != 1 {
			t.Errorf("%s: %d Deployments", op, changed)
		}
		for _, other := range operators {
			if other == op {
				continue
			}
			// Reading another operator's kinds (restore reads BackupJobs) is
			// fine; shipping its objects or image is not.
			for _, o := range v1 {
				if strings.HasPrefix(o.GetName(), "cairn-"+other+"-") || strings.HasSuffix(o.GetName(), "."+other+".cairn.dev") {
					t.Errorf("%s's release manifest has %s %s of %s", op, o.GetKind(), o.GetName(), other)
				}
			}
			if strings.Contains(string(before[op]), release.OperatorImage(other)) {
				t.Errorf("%s's release manifest names %s's image", op, other)
			}
		}
	}
	// "Release" backup: the other operators render exactly as before.
	if _, err := release.Render(r, "backup", "v9.9.9"); err != nil {
		t.Fatal(err)
	}
	for _, op := range operators {
		if op == "backup" {
			continue
		}
		again, err := release.Render(r, op, "v1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(before[op]) {
			t.Errorf("rendering backup changed %s's release", op)
		}
	}
	// The agent is pinned as in the platform, not "latest".
	if !strings.Contains(string(before["backup"]), "ghcr.io/cairn-dev/agent:v") {
		t.Error("the release does not pin the agent image")
	}
	if _, err := release.Render(r, "backup", "1.0"); err == nil {
		t.Error("Render accepted version 1.0")
	}
	if _, err := release.Render(r, "no-such-operator", "v1.0.0"); err == nil {
		t.Error("Render accepted an operator without a base")
	}
}

func render(t *testing.T, op, version string) []*unstructured.Unstructured {
	t.Helper()
	out, err := release.Render(root(t), op, version)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func image(t *testing.T, d *unstructured.Unstructured) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers", d.GetName(), len(cs))
	}
	return cs[0].(map[string]any)["image"].(string)
}

func setImage(t *testing.T, d *unstructured.Unstructured, img string) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	cs[0].(map[string]any)["image"] = img
	if err := unstructured.SetNestedSlice(d.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// TestTagging runs the git steps on a throw-away repository.
func TestTagging(t *testing.T) {
	dir := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "-q")
	for _, p := range []string{"operators/backup/main.go", "operators/restore/main.go", "deploy/components/operator/manager.yaml"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitRun("add", ".")
	gitRun("commit", "-q", "-m", "init")
	gitRun("tag", "operators/restore/v3.0.0")

	if err := release.CheckClean(dir, "backup"); err != nil {
		t.Fatal(err)
	}
	if err := release.CreateTag(dir, "backup", "v0.2.0"); err != nil {
		t.Fatal(err)
	}
	tags, err := release.GitTags(dir, "backup")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tags, []string{"operators/backup/v0.2.0"}) {
		t.Errorf("backup tags %v", tags)
	}
	if err := release.CheckVersion(tags, "backup", "v0.2.0"); err == nil {
		t.Error("the tagged version is accepted again")
	}
	restore, _ := release.GitTags(dir, "restore")
	if !slices.Equal(restore, []string{"operators/restore/v3.0.0"}) {
		t.Errorf("restore tags %v", restore)
	}
	if err := release.CreateTag(dir, "backup", "v0.2.0"); err == nil {
		t.Error("an existing tag was created again")
	}
	// Uncommitted changes in the operator's paths block its release only.
	if err := os.WriteFile(filepath.Join(dir, "operators/restore/main.go"), []byte("package main // changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := release.CheckClean(dir, "restore"); err == nil {
		t.Error("a dirty restore tree passed CheckClean")
	}
	if err := release.CheckClean(dir, "backup"); err != nil {
		t.Errorf("restore's changes block backup: %v", err)
	}
	// The component every base includes is part of every release.
	if err := os.WriteFile(filepath.Join(dir, "deploy/components/operator/manager.yaml"), []byte("# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := release.CheckClean(dir, "backup"); err == nil {
		t.Error("a change of deploy/components passed backup's CheckClean")
	}
}
