package install

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The installed form (Options.Installed): the platform as a user without
// cert-manager installs it (docs/install.md, "Without cert-manager") —
// `kustomize build` of a local overlay of platform/ that only sets the
// operators' images to those `make images` builds and provides the webhook
// certificates (cert-manager's objects and annotations removed, each webhook
// configuration's and conversion webhook's caBundle set, a kubernetes.io/tls
// Secret per operator) — applied whole, Deployments included. The pod
// runner's node runs the operators' pods as containers of their images.

// Namespace of the platform's operators.
const Namespace = "cairn-system"

// OperatorImage is the local image `make images` builds for operator name.
func OperatorImage(name string) string {
	repo, tag := os.Getenv("CAIRN_OPERATOR_IMAGE_REPO"), os.Getenv("CAIRN_OPERATOR_IMAGE_TAG")
	if repo == "" {
		repo = "cairn.local"
	}
	if tag == "" {
		tag = "dev"
	}
	return fmt.Sprintf("%s/%s-operator:%s", repo, name, tag)
}

// shippedImage is the platform's image of operator name, without its tag.
func shippedImage(name string) string { return "ghcr.io/cairn-dev/" + name + "-operator" }

// WebhookServiceName is operator name's webhook Service.
func WebhookServiceName(name string) string { return "cairn-" + name + "-webhook-service" }

// webhookCertSecret is the Secret the operator's Deployment mounts its
// serving certificate from.
func webhookCertSecret(name string) string { return "cairn-" + name + "-webhook-cert" }

// WriteOverlay writes into dir a kustomization of platform (a folder) that
// only sets what the docs' no-cert-manager install sets: each operator's
// image (images, to OperatorImage) and its webhook certificate path (no
// cert-manager objects or annotations; the CA of certs[operator] as the
// caBundle of every webhook that calls the operator's Service). objs are
// the platform's objects (Manifests(platform)), read for the webhooks to
// patch.
func WriteOverlay(dir, platform string, objs []*unstructured.Unstructured, certs map[string]*Certs) error {
	rel, err := filepath.Rel(dir, platform)
	if err != nil {
		return err
	}
	svcOwner := webhookServices(objs)
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(rel)},
	}
	var images []map[string]string
	for _, name := range OperatorNames(objs) {
		img := OperatorImage(name)
		i := strings.LastIndex(img, ":")
		images = append(images, map[string]string{"name": shippedImage(name), "newName": img[:i], "newTag": img[i+1:]})
	}
	k["images"] = images
	patches := []map[string]any{{
		"target": map[string]string{"group": "cert-manager.io"},
		"patch":  "$patch: delete\napiVersion: cert-manager.io/v1\nkind: Any\nmetadata:\n  name: any\n",
	}}
	for _, o := range objs {
		var paths []string // of the clientConfigs that call an operator's Service
		var op string
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for i, h := range hooks {
				if n, ok := serviceOwner(h.(map[string]any)["clientConfig"], svcOwner); ok {
					op = n
					paths = append(paths, fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i))
				}
			}
		case "CustomResourceDefinition":
			cc, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "conversion", "webhook", "clientConfig")
			if n, ok := serviceOwner(cc, svcOwner); ok {
				op = n
				paths = append(paths, "/spec/conversion/webhook/clientConfig/caBundle")
			}
		}
		if len(paths) == 0 {
			continue
		}
		c, ok := certs[op]
		if !ok {
			return fmt.Errorf("platform: no webhook certificate for the %s operator", op)
		}
		var ops []map[string]any
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/annotations/cert-manager.io~1inject-ca-from"})
		}
		for _, p := range paths {
			ops = append(ops, map[string]any{"op": "add", "path": p, "value": base64.StdEncoding.EncodeToString(c.CA)})
		}
		b, err := yaml.Marshal(ops)
		if err != nil {
			return err
		}
		patches = append(patches, map[string]any{"target": map[string]string{"kind": o.GetKind(), "name": o.GetName()}, "patch": string(b)})
	}
	k["patches"] = patches
	b, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), append([]byte("# Written by e2e/install (WriteOverlay): the platform without cert-manager, local images.\n"), b...), 0o644)
}

// serviceOwner is the operator whose webhook Service clientConfig cc calls.
func serviceOwner(cc any, svcOwner map[types.NamespacedName]string) (string, bool) {
	m, _ := cc.(map[string]any)
	svc, _ := m["service"].(map[string]any)
	if svc == nil {
		return "", false
	}
	n, ok := svcOwner[types.NamespacedName{Namespace: fmt.Sprint(svc["namespace"]), Name: fmt.Sprint(svc["name"])}]
	return n, ok
}

// WebhookCerts makes, per operator, a CA and a serving certificate for its
// webhook Service's DNS names (in dir/<operator>), as step 1 of the
// no-cert-manager install does with openssl.
func WebhookCerts(dir string, operators []string) (map[string]*Certs, error) {
	out := map[string]*Certs{}
	for _, name := range operators {
		svc := WebhookServiceName(name) + "." + Namespace + ".svc"
		c, err := newCerts(filepath.Join(dir, name), []string{svc, svc + ".cluster.local"}, nil)
		if err != nil {
			return nil, err
		}
		out[name] = c
	}
	return out, nil
}

// InstallShipped applies objs (Manifests of the overlay) whole, as
// `kubectl apply --server-side` would: CRDs first (until Established), then
// Namespaces, then each operator's webhook certificate as its TLS Secret,
// then the rest — Deployments included.
func InstallShipped(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, certs map[string]*Certs) error {
	var crds, nss, rest []*unstructured.Unstructured
	for _, in := range objs {
		o := in.DeepCopy()
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o)
		case "Namespace":
			nss = append(nss, o)
		default:
			rest = append(rest, o)
		}
	}
	if err := applyCRDs(ctx, c, crds); err != nil {
		return err
	}
	for _, o := range nss {
		if err := apply(ctx, c, o); err != nil {
			return err
		}
	}
	for name, ct := range certs {
		crt, err := os.ReadFile(filepath.Join(ct.Dir, "tls.crt"))
		if err != nil {
			return err
		}
		key, err := os.ReadFile(filepath.Join(ct.Dir, "tls.key"))
		if err != nil {
			return err
		}
		s := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: webhookCertSecret(name)},
			Type:       corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ct.CA}}
		if err := c.Patch(ctx, s, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("platform: the %s operator's webhook certificate Secret: %w", name, err)
		}
	}
	for _, o := range rest {
		if err := apply(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

// WaitDeployment waits until operator name's Deployment has rolled out:
// every replica updated, ready and available, no old one left.
func WaitDeployment(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: Namespace, Name: DeploymentName(name)}
	for {
		if err := c.Get(ctx, key, d); err == nil && d.Spec.Replicas != nil {
			want := *d.Spec.Replicas
			s := d.Status
			if s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
				s.AvailableReplicas == want && s.Replicas == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("platform: Deployment %s not rolled out: %w (status %+v)", key, ctx.Err(), d.Status)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DeploymentName is operator name's Deployment.
func DeploymentName(name string) string { return "cairn-" + name + "-controller-manager" }

// OperatorPods lists the running pods of operator name's Deployment.
func OperatorPods(ctx context.Context, c client.Client, name string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(Namespace),
		client.MatchingLabels{"app.kubernetes.io/name": "cairn-" + name + "-operator"}); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out, nil
}

// LeaseName is operator name's leader-election Lease (in Namespace).
func LeaseName(name string) string { return name + ".operators.cairn.dev" }

// LeaderPod returns the pod that holds operator name's Lease (its holder
// identity starts with the pod's name, controller-runtime's
// "<hostname>_<uuid>"), "" when none holds it.
func LeaderPod(ctx context.Context, c client.Client, name string) (string, error) {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: LeaseName(name)}, l); err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	h := *l.Spec.HolderIdentity
	if i := strings.LastIndex(h, "_"); i > 0 {
		h = h[:i]
	}
	return h, nil
}
