package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/toolset"
)

func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = Main(context.Background(), args, Options{
		Version: "v9.9.9",
		Stdout:  &out,
		Stderr:  &errb,
		Env: config.Env{
			Lookup:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			ReadFile: os.ReadFile,
		},
		Now: func() time.Time { return time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC) },
	})
	return code, out.String(), errb.String()
}

func TestVersionAndUsage(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{[]string{"--version"}, 0, "v9.9.9\n", ""},
		{[]string{"version"}, 0, "v9.9.9\n", ""},
		{nil, 2, "", "Usage: agent <command>"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"--help"}, 0, "Usage: agent <command>", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := run(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(out, tt.wantStdout) || !strings.Contains(errOut, tt.wantStderr) {
				t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
			}
			if tt.wantStdout == "v9.9.9\n" && out != tt.wantStdout {
				t.Fatalf("stdout %q, want exactly %q", out, tt.wantStdout)
			}
		})
	}
}

func TestFailureReport(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "termination-log")
	secret := "pw-that-must-not-appear"
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantReason string
	}{
		{"no store", map[string]string{"CAIRN_BACKUPJOB": "a/b"}, []string{"backup"}, contract.ExitUsage, "store is not set"},
		{"bad store", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "nfs"}, []string{"restore"}, contract.ExitUsage, `store "nfs"`},
		{"bad backup job", map[string]string{"CAIRN_BACKUPJOB": "nope", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir}, []string{"prune"}, contract.ExitUsage, "nope"},
		{"unmounted pvc", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": filepath.Join(dir, "nope"),
			"CAIRN_ENGINE": "postgres", "CAIRN_DB_HOST": "h", "CAIRN_DB_NAME": "d", "CAIRN_DB_USER": "u", "CAIRN_DB_PASSWORD": secret},
			[]string{"backup"}, 1, "does not exist"},
		{"no engine", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir, "CAIRN_DB_PASSWORD": secret},
			[]string{"backup"}, 1, "engine is not set"},
		{"prune without retention", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir},
			[]string{"prune"}, 1, "no retention is set"},
		{"restore with nothing stored", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir,
			"CAIRN_DB_HOST": "h", "CAIRN_DB_NAME": "d", "CAIRN_DB_USER": "u"}, []string{"restore"}, 1, "nothing to restore"},
		{"password argument", map[string]string{"CAIRN_BACKUPJOB": "a/b", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir},
			[]string{"backup", "--db-password=" + secret}, 2, "never taken from arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(termLog)
			tt.env["CAIRN_TERMINATION_LOG"] = termLog
			code, out, errOut := run(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, errOut)
			}
			if out != "" {
				t.Errorf("stdout %q on failure", out)
			}
			msg, err := os.ReadFile(termLog)
			if err != nil {
				t.Fatal(err)
			}
			_, perr := contract.Parse(string(msg))
			f, ok := perr.(*contract.FailedError)
			if !ok || !strings.Contains(f.Reason, tt.wantReason) {
				t.Fatalf("termination message %q: %v; want reason with %q", msg, perr, tt.wantReason)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "agent: ") || !strings.Contains(errOut, f.Reason) {
				t.Errorf("stderr is not the one-line reason: %q", errOut)
			}
			if strings.Contains(errOut+string(msg), secret) {
				t.Errorf("secret in output: %q %q", errOut, msg)
			}
		})
	}
}

// At the default path the termination message is written only if the file
// exists (inside a Pod); the agent never creates it.
func TestDefaultTerminationLogNotCreated(t *testing.T) {
	_, err := os.Stat(config.DefaultTerminationLog)
	existed := err == nil // inside a Pod it exists, and is written
	code, _, _ := run(t, map[string]string{"CAIRN_BACKUPJOB": "a/b"}, "backup")
	if code == 0 {
		t.Fatal("expected failure")
	}
	if _, err := os.Stat(config.DefaultTerminationLog); !existed && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(config.DefaultTerminationLog)
		t.Fatalf("the agent created %s", config.DefaultTerminationLog)
	}
}

func TestListEmptyAndPVCBackupFlow(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "tl")
	env := map[string]string{"CAIRN_BACKUPJOB": "shop/orders", "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": dir, "CAIRN_TERMINATION_LOG": termLog}
	code, out, errOut := run(t, env, "list")
	if code != 0 || out != "" {
		t.Fatalf("list of an empty store: exit %d stdout %q stderr %q", code, out, errOut)
	}
	msg, _ := os.ReadFile(termLog)
	if !strings.Contains(string(msg), `"command":"list"`) || !strings.Contains(string(msg), `"count":0`) {
		t.Fatalf("termination message %q", msg)
	}
	code, out, _ = run(t, env, "list", "--output=table")
	if code != 0 || !strings.HasPrefix(out, "ARTIFACT") {
		t.Fatalf("table: exit %d %q", code, out)
	}
}

// The exit codes are a contract with the operators' Job podFailurePolicy
// (cairn.dev/libs/agentjob): changing one breaks it.
func TestExitCodes(t *testing.T) {
	if contract.ExitOK != 0 || contract.ExitFailure != 1 || contract.ExitUsage != 2 || contract.ExitCorrupted != 3 {
		t.Fatalf("exit codes changed: ok %d failure %d usage %d corrupted %d",
			contract.ExitOK, contract.ExitFailure, contract.ExitUsage, contract.ExitCorrupted)
	}
}

// A restore of an artifact whose bytes do not match the catalog exits with
// ExitCorrupted (the operators do not retry it), before it reaches the
// database (there is none here).
func TestRestoreCorruptedArtifactExitCode(t *testing.T) {
	dir := t.TempDir()
	termLog := filepath.Join(dir, "termination-log")
	job := naming.Job{Namespace: "shop", Name: "orders"}
	start := time.Date(2026, 5, 1, 2, 3, 4, 0, time.UTC)
	name, err := naming.ArtifactName(job, "postgres", start)
	if err != nil {
		t.Fatal(err)
	}
	stored := []byte("these are not the bytes that were backed up")
	sum := sha256.Sum256([]byte("these are the bytes that were backed up"))
	cat, err := catalog.New(job).With(catalog.Entry{Name: name, Size: int64(len(stored)), Checksum: "sha256:" + hex.EncodeToString(sum[:]),
		Start: start, End: start.Add(time.Second), DurationSeconds: 1, Engine: "postgres", Format: "pg_dump-custom", Compression: "zstd"}, start)
	if err != nil {
		t.Fatal(err)
	}
	for key, data := range map[string][]byte{job.Key(name): stored, job.CatalogKey(): cat.Encode()} {
		p := filepath.Join(dir, "store", filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"CAIRN_BACKUPJOB": job.String(), "CAIRN_STORE": "pvc", "CAIRN_PVC_PATH": filepath.Join(dir, "store"),
		"CAIRN_DB_HOST": "db.invalid", "CAIRN_DB_NAME": "orders", "CAIRN_DB_USER": "u", "CAIRN_TERMINATION_LOG": termLog}
	code, _, errOut := run(t, env, "restore")
	if code != contract.ExitCorrupted {
		t.Fatalf("exit %d, want %d (ExitCorrupted); stderr %q", code, contract.ExitCorrupted, errOut)
	}
	msg, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	_, perr := contract.Parse(string(msg))
	if f, ok := perr.(*contract.FailedError); !ok || !strings.Contains(f.Reason, "corrupted") || !strings.Contains(f.Reason, "not touched") {
		t.Fatalf("termination message %q", msg)
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{errors.New("connection refused"), contract.ExitFailure},
		{&config.UsageError{Msg: "store is not set"}, contract.ExitUsage},
		{fmt.Errorf("restore: %w", pipeline.ErrCorrupted), contract.ExitCorrupted},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// A server no tool of the image can serve (as backup's and restore's tool
// choice report it): exit 4, failure code UnsupportedServerVersion, and
// the server in the failure line (the
// operator records it in status.server and chooses by it).
func TestUnsupportedServerReport(t *testing.T) {
	termLog := filepath.Join(t.TempDir(), "termination-log")
	cfg := &config.Config{TerminationLog: termLog, TerminationLogSet: true}
	uerr := fmt.Errorf("choosing tools: %w", &contract.CodedError{Code: contract.CodeUnsupportedServer, Err: &toolset.UnsupportedError{
		Server:    toolset.Server{Engine: "postgres", Version: "18.6", Major: 18, Minor: 6},
		Supported: "PostgreSQL 15 and older", Need: "use an agent image with PostgreSQL 18 (or newer) tools"}})
	var errb strings.Builder
	if code := fail(Options{Stderr: &errb}, cfg, "backup", uerr, nil); code != contract.ExitUnsupported {
		t.Fatalf("exit %d, want %d", code, contract.ExitUnsupported)
	}
	msg, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatal(err)
	}
	_, perr := contract.Parse(string(msg))
	f, ok := perr.(*contract.FailedError)
	if !ok || f.Code != contract.CodeUnsupportedServer || f.Server == nil || *f.Server != (contract.ServerInfo{Engine: "postgres", Version: "18.6"}) ||
		!strings.Contains(f.Reason, "PostgreSQL 18.6") {
		t.Fatalf("termination message %q: %#v", msg, perr)
	}
}
