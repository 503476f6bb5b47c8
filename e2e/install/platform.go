// Package install runs Cairn on a cluster from e2e/cluster the way a user
// installs it — `kustomize build platform` applied — except that the
// operators run as local processes (kwok pods run no code): it builds their
// binaries, applies the platform with each operator's webhook Service replaced
// by a local Service (https://127.0.0.1:<port>, a CA made here), and starts,
// kills and stops operator processes with their Deployment's arguments and
// their ServiceAccount's identity. Each process serves its metrics over plain
// HTTP on a loopback port (Operator.Metrics scrapes them).
package install

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cairn.dev/agent/testservers"
)

// Build compiles operators/<name> of the repository at root into
// outDir/<name>-operator and returns its path. The Go build cache makes a
// rebuild of unchanged code take about a second. -trimpath as `make images`
// builds the operators' images: the same flags share the build cache.
func Build(ctx context.Context, root, outDir, name string) (string, error) {
	out := filepath.Join(outDir, name+"-operator")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./operators/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("platform: building the %s operator: %w\n%s", name, err, b)
	}
	return out, nil
}

// Operator is one operator process.
type Operator struct {
	// Name of the process, e.g. "backup" or "backup-1".
	Name string
	// Operator it runs ("backup", "restore").
	Operator string
	// Binary built by Build.
	Binary string
	// Kubeconfig the process connects with (its ServiceAccount's identity).
	Kubeconfig string
	// Service whose webhook requests it serves, on WebhookPort.
	Service     *Service
	WebhookPort int
	// Args are its Deployment's container arguments; Extra come after the
	// harness's own (local addresses, certificates), e.g. lease durations.
	Args, Extra []string
	// LogPath receives its output.
	LogPath string
	// Detach starts it in a session of its own, so it outlives this process
	// (the demo); Stop and Kill still work by PID.
	Detach bool

	// ProbePort serves /healthz and /readyz; MetricsPort serves /metrics
	// (plain HTTP on 127.0.0.1: the installed Deployment serves HTTPS with
	// Kubernetes authn/authz to Prometheus; a local process needs neither).
	ProbePort, MetricsPort int
	Cmd                    *exec.Cmd
	exited                 chan struct{}
}

// Start starts the process: its Deployment's arguments, then the local
// addresses (metrics and probes on free loopback ports, webhooks on
// WebhookPort with the Service's certificates), then Extra; a later flag
// wins.
func (o *Operator) Start() error {
	var err error
	if o.ProbePort, err = testservers.FreePort(); err != nil {
		return err
	}
	if o.MetricsPort, err = testservers.FreePort(); err != nil {
		return err
	}
	args := append([]string{}, o.Args...)
	args = append(args,
		"--kubeconfig", o.Kubeconfig,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(o.MetricsPort),
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(o.ProbePort),
		"--enable-webhooks=true",
		"--webhook-port="+strconv.Itoa(o.WebhookPort),
		"--webhook-cert-dir="+o.Service.Certs.Dir)
	args = append(args, o.Extra...)
	logf, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Ends with the test process even when it dies without cleaning up
		// (a `go test -timeout` panic).
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("platform: starting %s: %w", o.Binary, err)
	}
	o.Cmd = cmd
	o.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(o.exited) }()
	return nil
}

// Exited says whether the process has ended.
func (o *Operator) Exited() bool {
	select {
	case <-o.exited:
		return true
	default:
		return false
	}
}

// WaitReady waits until /readyz answers 200 (webhook server started, when
// webhooks are on), failing early if the process exits.
func (o *Operator) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", o.ProbePort)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-o.exited:
			return fmt.Errorf("platform: the %s operator exited; its log: %s\n%s", o.Name, o.LogPath, o.Tail(40))
		case <-ctx.Done():
			return fmt.Errorf("platform: the %s operator is not ready: %w\n%s", o.Name, ctx.Err(), o.Tail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (o *Operator) Kill() error {
	if o.Cmd == nil || o.Cmd.Process == nil {
		return nil
	}
	o.Service.RemoveBackend(o.WebhookPort)
	if err := o.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-o.exited
	return nil
}

// Stop sends SIGTERM and waits up to 15 s, then kills.
func (o *Operator) Stop() error {
	if o.Cmd == nil || o.Cmd.Process == nil {
		return nil
	}
	o.Service.RemoveBackend(o.WebhookPort)
	_ = o.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
		return nil
	case <-time.After(15 * time.Second):
		return o.Kill()
	}
}

// Tail returns the last n lines of the log.
func (o *Operator) Tail(n int) string {
	b, err := os.ReadFile(o.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
