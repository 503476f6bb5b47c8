package install

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// OperatorLabel names the operator an object of the platform belongs to; every
// base in deploy/ sets it on all its objects.
const OperatorLabel = "cairn.dev/operator"

// fieldOwner is the server-side apply field manager of the install.
const fieldOwner = "cairn-e2e"

// Manifests runs `kustomize build` on dir (the platform overlay, normally
// <root>/platform) with kustomize's Go API — the same objects `kustomize build
// platform | kubectl apply -f -` installs.
func Manifests(dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("platform: kustomize build %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("platform: kustomize build %s: %w", dir, err)
		}
		objs = append(objs, o)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("platform: kustomize build %s: no objects", dir)
	}
	return objs, nil
}

// OperatorNames lists the operators objs has a Deployment of, in order.
func OperatorNames(objs []*unstructured.Unstructured) []string {
	var names []string
	for _, o := range objs {
		if n := o.GetLabels()[OperatorLabel]; o.GetKind() == "Deployment" && n != "" {
			names = append(names, n)
		}
	}
	return names
}

// Deployment is what the harness takes from an operator's Deployment in the
// platform to run it as a local process the way the cluster would run its pod.
type Deployment struct {
	Namespace      string
	ServiceAccount string
	// Args of the manager container, with $(VAR) references to its env
	// expanded.
	Args []string
}

// OperatorDeployment finds operator name's Deployment among objs.
func OperatorDeployment(objs []*unstructured.Unstructured, name string) (*Deployment, error) {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetLabels()[OperatorLabel] != name {
			continue
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if sa == "" || len(containers) == 0 {
			return nil, fmt.Errorf("platform: Deployment %s has no serviceAccountName or no container", o.GetName())
		}
		c := containers[0].(map[string]any)
		env := map[string]string{}
		envs, _, _ := unstructured.NestedSlice(c, "env")
		for _, e := range envs {
			em := e.(map[string]any)
			if v, ok := em["value"].(string); ok {
				env[em["name"].(string)] = v
			}
		}
		args, _, _ := unstructured.NestedStringSlice(c, "args")
		for i, a := range args {
			for k, v := range env {
				a = strings.ReplaceAll(a, "$("+k+")", v)
			}
			args[i] = a
		}
		return &Deployment{Namespace: o.GetNamespace(), ServiceAccount: sa, Args: args}, nil
	}
	return nil, fmt.Errorf("platform: no Deployment with label %s=%s in the platform", OperatorLabel, name)
}

// webhookService is the Service (namespace/name) that an operator's webhook
// configurations and conversion webhooks call.
func webhookServices(objs []*unstructured.Unstructured) map[types.NamespacedName]string {
	out := map[types.NamespacedName]string{}
	for _, o := range objs {
		if o.GetKind() != "Service" || o.GetLabels()[OperatorLabel] == "" {
			continue
		}
		ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		for _, p := range ports {
			if p.(map[string]any)["name"] == "webhook" {
				out[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = o.GetLabels()[OperatorLabel]
			}
		}
	}
	return out
}

// Install applies objs (from Manifests) the way `kubectl apply
// --server-side` would, for a cluster whose operators run as local processes:
//
//   - every webhook client config (admission webhooks and CRD conversion) that
//     names an operator's webhook Service is rewritten to that operator's
//     local Service (url https://127.0.0.1:<port>/<path>, caBundle of its
//     certificates);
//   - Deployments are not applied (kwok pods run no code; the harness starts
//     the operators), nor objects whose kind the cluster does not serve
//     (cert-manager's Certificate and Issuer: the harness makes the
//     certificates); they are returned as skipped;
//   - CRDs first, waiting until they are Established, then Namespaces, then
//     the rest.
func Install(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, services map[string]*Service) (skipped []string, err error) {
	svcOwner := webhookServices(objs)
	var crds, nss, rest []*unstructured.Unstructured
	for _, in := range objs {
		o := in.DeepCopy()
		if err := pointWebhooks(o, svcOwner, services); err != nil {
			return nil, err
		}
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Kind == "CustomResourceDefinition":
			crds = append(crds, o)
		case gvk.Kind == "Deployment":
			skipped = append(skipped, gvk.Kind+" "+o.GetName())
		case gvk.Kind == "Namespace":
			nss = append(nss, o)
		default:
			if _, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
				skipped = append(skipped, gvk.Kind+" "+o.GetName())
				continue
			}
			rest = append(rest, o)
		}
	}
	if err := applyCRDs(ctx, c, crds); err != nil {
		return nil, err
	}
	for _, group := range [][]*unstructured.Unstructured{nss, rest} {
		for _, o := range group {
			if err := apply(ctx, c, o); err != nil {
				return nil, err
			}
		}
	}
	return skipped, nil
}

// applyCRDs applies crds and waits until each is Established.
func applyCRDs(ctx context.Context, c client.Client, crds []*unstructured.Unstructured) error {
	for _, o := range crds {
		if err := apply(ctx, c, o); err != nil {
			return err
		}
	}
	for _, o := range crds {
		if err := waitEstablished(ctx, c, o.GetName()); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	// A CRD just established may not be in the client's REST mapper yet.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership)
		if err == nil {
			return nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return fmt.Errorf("platform: applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pointWebhooks rewrites the webhook client configs of o that call an
// operator's webhook Service to that operator's local Service.
func pointWebhooks(o *unstructured.Unstructured, svcOwner map[types.NamespacedName]string, services map[string]*Service) error {
	rewrite := func(cc map[string]any) error {
		svc, ok := cc["service"].(map[string]any)
		if !ok {
			return nil
		}
		key := types.NamespacedName{Namespace: fmt.Sprint(svc["namespace"]), Name: fmt.Sprint(svc["name"])}
		op, ok := svcOwner[key]
		if !ok {
			return fmt.Errorf("platform: %s %s calls Service %s, which no operator's base defines", o.GetKind(), o.GetName(), key)
		}
		s, ok := services[op]
		if !ok {
			return fmt.Errorf("platform: no local Service for the %s operator", op)
		}
		path, _ := svc["path"].(string)
		delete(cc, "service")
		cc["url"] = s.URL(path)
		cc["caBundle"] = base64.StdEncoding.EncodeToString(s.Certs.CA)
		return nil
	}
	switch o.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			cc, _ := h.(map[string]any)["clientConfig"].(map[string]any)
			if cc == nil {
				continue
			}
			if err := rewrite(cc); err != nil {
				return err
			}
		}
		return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
	case "CustomResourceDefinition":
		cc, found, _ := unstructured.NestedMap(o.Object, "spec", "conversion", "webhook", "clientConfig")
		if !found {
			return nil
		}
		if err := rewrite(cc); err != nil {
			return err
		}
		return unstructured.SetNestedMap(o.Object, cc, "spec", "conversion", "webhook", "clientConfig")
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var conds []apiextensionsv1.CustomResourceDefinitionCondition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
			conds = crd.Status.Conditions
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("platform: CRD %s not established: %w; conditions: %+v", name, ctx.Err(), conds)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ServiceAccountKubeconfig writes to path a kubeconfig for cfg's API server
// that authenticates as ServiceAccount ns/name with a token from the
// TokenRequest API: a local operator process then has exactly the RBAC the
// platform grants its pod.
func ServiceAccountKubeconfig(ctx context.Context, c client.Client, cfg *rest.Config, ns, name, path string, ttl time.Duration) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("platform: token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cairn"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: name, Namespace: ns}
	kc.CurrentContext = "cairn"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
