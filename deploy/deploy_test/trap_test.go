package deploy_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/testing/testenv"
)

// TestDownOperatorTrapsNothing installs the platform's webhook configurations
// with every operator down (their webhook Services have no endpoint, so each
// call fails and failurePolicy Fail refuses the request) and shows that
// nothing needs a Cairn webhook to be released: removing a BackupJob's
// finalizer by hand, setting cairn.dev/skip-cleanup, relabelling, and deleting
// a namespace full of BackupJobs and RestoreJobs with finalizers (the real
// namespace controller of kube-controller-manager deletes them; the user
// removes their finalizers) — everything is gone. A create, a spec change and
// a run-now request still need the webhook.
func TestDownOperatorTrapsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	kcmExited := startNamespaceController(t)

	// The platform without its webhook configurations (and without
	// whatever an earlier test left of them), so objects can be created.
	// The port policies' bindings are left out too, so the objects are
	// stored without a port, like objects created before the policy existed.
	objs := build(t, "platform")
	var hooks, rest []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "MutatingAdmissionPolicyBinding":
			hooks = append(hooks, o)
			_ = env.Client.Delete(ctx, o.DeepCopy())
		default:
			rest = append(rest, o)
		}
	}
	if len(hooks) == 0 {
		t.Fatal("the platform has no webhook configurations")
	}
	apply(t, rest, nil)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "trapped-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	backupJob := func(name string) *unstructured.Unstructured {
		o := object(t, ns.Name, fmt.Sprintf(`
apiVersion: backup.cairn.dev/v1
kind: BackupJob
metadata:
  name: %s
  finalizers: [%s]
spec:
  database: {engine: postgres, host: pg.shop.svc, database: orders, credentialsSecretRef: {name: pg}}
  schedule: "0 2 * * *"
  storage: {pvc: {claimName: backups}}
`, name, backupv1.CleanupFinalizer))
		return o
	}
	restoreJob := func(name string) *unstructured.Unstructured {
		return object(t, ns.Name, fmt.Sprintf(`
apiVersion: restore.cairn.dev/v1
kind: RestoreJob
metadata:
  name: %s
  finalizers: [%s]
spec:
  source: {backupJob: {name: bj-0}}
  target: {engine: postgres, host: scratch.shop.svc, database: orders, credentialsSecretRef: {name: pg}}
`, name, restorev1.CleanupFinalizer))
	}
	// Created while no webhook is installed, with the finalizers the
	// operators' webhooks would have added.
	poll(ctx, t, "creates to pass without webhooks and port policy", func() error {
		probe := backupJob("probe")
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if port, found, _ := unstructured.NestedInt64(probe.Object, "spec", "database", "port"); found {
			return fmt.Errorf("port %d set", port)
		}
		return nil
	})
	var created []*unstructured.Unstructured
	for i := range 3 {
		created = append(created, backupJob(fmt.Sprintf("bj-%d", i)), restoreJob(fmt.Sprintf("rj-%d", i)))
	}
	for _, o := range created {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	// The operators go down: their webhook configurations are installed and
	// every call fails.
	apply(t, hooks, nil)
	for _, probe := range []*unstructured.Unstructured{backupJob("probe"), restoreJob("probe")} {
		poll(ctx, t, probe.GetKind()+" creates to need the down webhook", func() error {
			err := env.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			if !isWebhookDown(err) {
				return fmt.Errorf("create: %v", err)
			}
			return nil
		})
	}

	bj := func(name string) *unstructured.Unstructured {
		o := backupJob(name)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	patch := func(o *unstructured.Unstructured, p string) error {
		return env.Client.Patch(ctx, o.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)))
	}

	// Still needing the webhook (failurePolicy Fail): a spec change, a
	// run-now request, a create.
	if err := patch(bj("bj-0"), `{"spec":{"retentionDays":30}}`); !isWebhookDown(err) {
		t.Errorf("a spec change with the webhook down: got %v, want the webhook call to fail", err)
	}
	if err := patch(bj("bj-0"), `{"metadata":{"annotations":{"`+backupv1.RunNowAnnotation+`":"1"}}}`); !isWebhookDown(err) {
		t.Errorf("a run-now request with the webhook down: got %v, want the webhook call to fail", err)
	}
	if err := env.Client.Create(ctx, backupJob("new")); !isWebhookDown(err) {
		t.Errorf("a create with the webhook down: got %v, want the webhook call to fail", err)
	}

	// Released by hand without the webhook.
	if err := patch(bj("bj-0"), `{"metadata":{"annotations":{"`+finalizer.SkipCleanupAnnotation+`":"true"}}}`); err != nil {
		t.Errorf("setting %s: %v", finalizer.SkipCleanupAnnotation, err)
	}
	if err := patch(bj("bj-0"), `{"metadata":{"labels":{"team":"shop"}}}`); err != nil {
		t.Errorf("relabelling: %v", err)
	}
	if err := patch(bj("bj-0"), `{"metadata":{"finalizers":null}}`); err != nil {
		t.Errorf("removing the finalizer: %v", err)
	}
	got := bj("bj-0")
	if len(got.GetFinalizers()) != 0 || got.GetAnnotations()[finalizer.SkipCleanupAnnotation] != "true" {
		t.Errorf("bj-0: finalizers %q, annotations %v", got.GetFinalizers(), got.GetAnnotations())
	}
	// Releasing it did not change its spec (the port policy leaves
	// metadata-only updates alone, which would otherwise need the webhook).
	if port, found, _ := unstructured.NestedInt64(got.Object, "spec", "database", "port"); found || got.GetGeneration() != 1 {
		t.Errorf("bj-0: releasing it changed the spec: port %d, generation %d", port, got.GetGeneration())
	}
	// An object being deleted takes any metadata change, e.g. with
	// kubectl edit: the annotation and the finalizer in one update.
	if err := env.Client.Delete(ctx, bj("bj-1")); err != nil {
		t.Fatal(err)
	}
	terminating := bj("bj-1")
	if terminating.GetDeletionTimestamp() == nil {
		t.Fatal("bj-1 has no deletionTimestamp")
	}
	terminating.SetAnnotations(map[string]string{finalizer.SkipCleanupAnnotation: "true", "note": "released by hand"})
	terminating.SetFinalizers(nil)
	if err := env.Client.Update(ctx, terminating); err != nil {
		t.Errorf("releasing bj-1 while it is deleted: %v", err)
	}

	// Delete the namespace; the namespace controller deletes what is in it;
	// the user releases what the down operators cannot.
	if err := env.Client.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "the namespace to be gone", func() error {
		if err := kcmExited(); err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, gvk := range []string{"backup.cairn.dev/v1 BackupJob", "restore.cairn.dev/v1 RestoreJob"} {
			gv, kind, _ := strings.Cut(gvk, " ")
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion(gv)
			l.SetKind(kind + "List")
			if err := env.Client.List(ctx, l, client.InNamespace(ns.Name)); err != nil {
				return err
			}
			for i := range l.Items {
				o := &l.Items[i]
				left = append(left, o.GetKind()+" "+o.GetName())
				if o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) > 0 {
					if err := patch(o, `{"metadata":{"finalizers":null}}`); err != nil {
						t.Fatalf("removing the finalizer of %s %s in the deleted namespace: %v", o.GetKind(), o.GetName(), err)
					}
				}
			}
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		switch {
		case apierrors.IsNotFound(err):
			if len(left) > 0 {
				return fmt.Errorf("namespace gone, but %v listed", left)
			}
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("namespace %s still there; left: %v", ns.Name, left)
	})
}

// isWebhookDown reports whether err is the API server refusing a request
// because a Cairn webhook could not be called.
func isWebhookDown(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed calling webhook") && strings.Contains(err.Error(), ".cairn.dev")
}

func object(t *testing.T, ns, doc string) *unstructured.Unstructured {
	t.Helper()
	o := fromYAML(t, []byte(doc))
	o.SetNamespace(ns)
	return o
}

func poll(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}

// startNamespaceController runs kube-controller-manager's namespace
// controller (the one that empties and removes a deleted namespace) against
// the test API server until the test ends. The returned function reports an
// error once the process has exited.
func startNamespaceController(t *testing.T) func() error {
	t.Helper()
	return startControllers(t, "namespace", "--concurrent-namespace-syncs=2")
}

// startControllers runs kube-controller-manager with only controllers (its
// --controllers value) against the test API server until the test ends; see
// startNamespaceController.
func startControllers(t *testing.T, controllers string, flags ...string) func() error {
	t.Helper()
	dir, err := testenv.FindControlPlane("", "kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Config
	if len(cfg.CertData) == 0 || len(cfg.KeyData) == 0 {
		t.Fatal("the test API server's admin config has no client certificate to give kube-controller-manager")
	}
	work := t.TempDir()
	kubeconfig := filepath.Join(work, "kubeconfig")
	b64 := base64.StdEncoding.EncodeToString
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: admin
  user: {client-certificate-data: %s, client-key-data: %s}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, cfg.Host, b64(cfg.CAData), b64(cfg.CertData), b64(cfg.KeyData))), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + kubeconfig, "--controllers=" + controllers, "--leader-elect=false",
		"--secure-port=0"}, flags...)...)
	logf, err := os.Create(filepath.Join(work, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			if data, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("kube-controller-manager log (last 3000 bytes):\n%s", tail(data, 3000))
			}
		}
		logf.Close()
	})
	return func() error {
		select {
		case <-exited:
			data, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("kube-controller-manager exited: %v\n%s", waitErr, tail(data, 3000))
		default:
			return nil
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
