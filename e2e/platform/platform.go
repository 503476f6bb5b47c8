// Package platform runs Cairn's operators as local processes against a
// cluster from e2e/cluster: it builds their binaries, installs their CRDs and
// webhook configurations as generated in deploy/<operator>/ (rewritten to
// reach the local process at https://127.0.0.1:<port>/<path> with a CA made
// here), and starts, kills and stops the processes.
package platform

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Build compiles operators/<name> of the repository at root into
// outDir/<name>-operator and returns its path. The Go build cache makes a
// rebuild of unchanged code take about a second.
func Build(ctx context.Context, root, outDir, name string) (string, error) {
	out := filepath.Join(outDir, name+"-operator")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./operators/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("platform: building the %s operator: %w\n%s", name, err, b)
	}
	return out, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func installScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(admissionv1.AddToScheme(s))
	return s
}

// Webhook says where an operator's webhooks are served; nil installs none.
type Webhook struct {
	Port  int
	Certs *Certs
}

func (w *Webhook) url(path string) *string {
	u := fmt.Sprintf("https://127.0.0.1:%d/%s", w.Port, strings.TrimPrefix(path, "/"))
	return &u
}

// Install installs the CRDs of deploy/<name>/crd/bases and waits until they
// are established. With wh, it also installs deploy/<name>/webhook/generated,
// named cairn-<name>-<generated name>, and, when deploy/<name>/crd/patches/
// webhook_conversion.yaml exists, the CRDs' conversion webhook, all pointing
// at wh.
func Install(ctx context.Context, cfg *rest.Config, root, name string, wh *Webhook) error {
	c, err := client.New(cfg, client.Options{Scheme: installScheme()})
	if err != nil {
		return err
	}
	deploy := filepath.Join(root, "deploy", name)
	crdFiles, err := filepath.Glob(filepath.Join(deploy, "crd", "bases", "*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		return fmt.Errorf("platform: no CRDs in %s/crd/bases (run `make manifests`)", deploy)
	}
	_, convErr := os.Stat(filepath.Join(deploy, "crd", "patches", "webhook_conversion.yaml"))
	conversion := wh != nil && convErr == nil
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range crdFiles {
		docs, err := readDocs(f)
		if err != nil {
			return err
		}
		for _, d := range docs {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(d, crd); err != nil {
				return fmt.Errorf("platform: %s: %w", f, err)
			}
			if conversion && len(crd.Spec.Versions) > 1 {
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
					Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{
						ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: wh.url("/convert"), CABundle: wh.Certs.CA},
						ConversionReviewVersions: []string{"v1"},
					},
				}
			}
			if err := createOrUpdate(ctx, c, crd); err != nil {
				return err
			}
			crds = append(crds, crd)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return err
		}
	}
	if wh == nil {
		return nil
	}
	whFiles, _ := filepath.Glob(filepath.Join(deploy, "webhook", "generated", "*.yaml"))
	if len(whFiles) == 0 {
		return fmt.Errorf("platform: no webhook manifests in %s/webhook/generated", deploy)
	}
	for _, f := range whFiles {
		docs, err := readDocs(f)
		if err != nil {
			return err
		}
		for _, d := range docs {
			var tm struct{ Kind string }
			if err := yaml.Unmarshal(d, &tm); err != nil {
				return err
			}
			var obj client.Object
			switch tm.Kind {
			case "MutatingWebhookConfiguration":
				m := &admissionv1.MutatingWebhookConfiguration{}
				if err := yaml.Unmarshal(d, m); err != nil {
					return err
				}
				for i := range m.Webhooks {
					pointAt(&m.Webhooks[i].ClientConfig, wh)
				}
				obj = m
			case "ValidatingWebhookConfiguration":
				v := &admissionv1.ValidatingWebhookConfiguration{}
				if err := yaml.Unmarshal(d, v); err != nil {
					return err
				}
				for i := range v.Webhooks {
					pointAt(&v.Webhooks[i].ClientConfig, wh)
				}
				obj = v
			default:
				continue
			}
			obj.SetName("cairn-" + name + "-" + obj.GetName())
			if err := createOrUpdate(ctx, c, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

func pointAt(cc *admissionv1.WebhookClientConfig, wh *Webhook) {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	cc.Service = nil
	cc.URL = wh.url(path)
	cc.CABundle = wh.Certs.CA
}

func readDocs(file string) ([][]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("platform: %s: %w", file, err)
		}
		if len(bytes.TrimSpace(d)) == 0 || strings.TrimSpace(stripComments(d)) == "" {
			continue
		}
		docs = append(docs, d)
	}
}

func stripComments(d []byte) string {
	var out []string
	for _, l := range strings.Split(string(d), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func createOrUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("platform: CRD %s not established: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Operator is one operator process.
type Operator struct {
	// Name is the operator ("backup", "restore").
	Name string
	// Binary built by Build.
	Binary string
	// Kubeconfig the process connects with.
	Kubeconfig string
	// Webhook it serves; nil runs it with --enable-webhooks=false.
	Webhook *Webhook
	// Args are extra flags, e.g. leader election.
	Args []string
	// LogPath receives its output.
	LogPath string
	// Detach starts it in a session of its own, so it outlives this process
	// (the demo); Stop and Kill still work by PID.
	Detach bool

	ProbePort int
	Cmd       *exec.Cmd
	exited    chan struct{}
}

// Start starts the process. Leader election is off unless Args turn it on.
func (o *Operator) Start() error {
	var err error
	if o.ProbePort, err = FreePort(); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", o.Kubeconfig,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(o.ProbePort),
	}
	if !hasFlag(o.Args, "--leader-elect") {
		args = append(args, "--leader-elect=false")
	}
	if o.Webhook != nil {
		args = append(args, "--enable-webhooks=true", "--webhook-port", strconv.Itoa(o.Webhook.Port), "--webhook-cert-dir", o.Webhook.Certs.Dir)
	} else {
		args = append(args, "--enable-webhooks=false")
	}
	args = append(args, o.Args...)
	logf, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
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

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
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
