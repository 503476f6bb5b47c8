package podrunner

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io/cairn-dev/agent:v0.1.0":         "ghcr.io/cairn-dev/agent",
		"ghcr.io/cairn-dev/agent@sha256:abcd":    "ghcr.io/cairn-dev/agent",
		"ghcr.io/cairn-dev/agent:v1@sha256:abcd": "ghcr.io/cairn-dev/agent",
		"localhost:5000/agent":                   "localhost:5000/agent",
		"localhost:5000/agent:dev":               "localhost:5000/agent",
		"agent":                                  "agent",
	} {
		if got := repository(in); got != want {
			t.Errorf("repository(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHostPaths(t *testing.T) {
	mounts := []hostMount{{Host: "/h/store", Container: "/var/lib/cairn/store"}, {Host: "/h/tmp", Container: "/tmp"}}
	for in, want := range map[string]string{
		"CAIRN_PVC_PATH=/var/lib/cairn/store": "CAIRN_PVC_PATH=/h/store",
		"X=/var/lib/cairn/store/sub/file":     "X=/h/store/sub/file",
		"X=/var/lib/cairn/storeroom":          "X=/var/lib/cairn/storeroom",
		"TMP=/tmp":                            "TMP=/h/tmp",
		"CAIRN_DB_HOST=127.0.0.1":             "CAIRN_DB_HOST=127.0.0.1",
		"EMPTY=":                              "EMPTY=",
	} {
		if got := hostPaths(in, mounts); got != want {
			t.Errorf("hostPaths(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTermMessage(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "log")
	specs := []preparedContainer{{name: "c", spec: containerSpec{TermLogHost: file}}}
	fallback := []preparedContainer{{name: "c", spec: containerSpec{TermLogHost: file, termFallback: true}}}
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"artifact":"a"}`)
	if got := termMessage(specs, "c", exitStatus{}, "logs"); got != `{"artifact":"a"}` {
		t.Errorf("file message: %q", got)
	}
	write(strings.Repeat("x", 5000))
	if got := termMessage(specs, "c", exitStatus{}, ""); len(got) != maxMessageBytes {
		t.Errorf("a long message is cut at %d bytes, got %d", maxMessageBytes, len(got))
	}
	write("")
	if got := termMessage(specs, "c", exitStatus{Code: 1}, "line 1\nboom\n"); got != "" {
		t.Errorf("ReadFile policy falls back to nothing, got %q", got)
	}
	if got := termMessage(fallback, "c", exitStatus{Code: 1}, "line 1\nboom\n"); got != "line 1\nboom" {
		t.Errorf("FallbackToLogsOnError: %q", got)
	}
	if got := termMessage(fallback, "c", exitStatus{Code: 0}, "fine\n"); got != "" {
		t.Errorf("no fallback on success, got %q", got)
	}
}

func TestExpandAll(t *testing.T) {
	env := []corev1.EnvVar{{Name: "AGENT_IMAGE", Value: "ghcr.io/cairn-dev/agent:v1"}, {Name: "E", Value: ""}}
	got := expandAll([]string{"--agent-image=$(AGENT_IMAGE)", "$$(AGENT_IMAGE)", "$(UNKNOWN)", "a$(E)b", "$(", "x$"}, env)
	want := []string{"--agent-image=ghcr.io/cairn-dev/agent:v1", "$(AGENT_IMAGE)", "$(UNKNOWN)", "ab", "$(", "x$"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expandAll = %q, want %q", got, want)
	}
}
