package deploy_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// certificate is the part of a cert-manager Certificate the manifests rely on.
type certificate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		IssuerRef  struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"issuerRef"`
		PrivateKey struct {
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
	} `json:"spec"`
}

type issuer struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		SelfSigned *struct{} `json:"selfSigned"`
	} `json:"spec"`
}

func arg(c corev1.Container, name string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// runsAgent names the operators whose children run the agent (and so are
// given its image); the orchestrator's children are other operators' kinds.
var runsAgent = map[string]bool{"backup": true, "restore": true, "migration": true}

// TestManager checks each operator's Deployment: two replicas with leader
// election, probes on :8081, metrics :8443 and webhooks :9443 matching the
// Services, requests and limits, topology spread, the webhook certificate
// mounted where --webhook-cert-dir points, and the agent image configurable.
func TestManager(t *testing.T) {
	for _, op := range operators {
		objs := build(t, "deploy/"+op)
		var d appsv1.Deployment
		into(t, find(t, objs, "Deployment", "cairn-"+op+"-controller-manager"), &d)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("%s: replicas %v, want 2", op, d.Spec.Replicas)
		}
		if len(d.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", op, len(d.Spec.Template.Spec.Containers))
		}
		c := d.Spec.Template.Spec.Containers[0]
		flags := map[string]string{
			"--leader-elect": "true", "--metrics-bind-address": ":8443", "--metrics-secure": "true",
			"--health-probe-bind-address": ":8081", "--webhook-port": "9443",
		}
		if runsAgent[op] {
			flags["--agent-image"] = "$(AGENT_IMAGE)"
		}
		for flag, want := range flags {
			if got, ok := arg(c, flag); !ok || got != want {
				t.Errorf("%s: %s=%q, want %q", op, flag, got, want)
			}
		}
		if _, ok := arg(c, "--leader-election-id"); ok {
			t.Errorf("%s: sets --leader-election-id; the default %s.operators.cairn.dev is the one ID per operator", op, op)
		}
		agent := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "AGENT_IMAGE" })
		switch {
		case runsAgent[op] && (agent < 0 || !strings.HasPrefix(c.Env[agent].Value, "ghcr.io/cairn-dev/agent:")):
			t.Errorf("%s: AGENT_IMAGE env %v", op, c.Env)
		case !runsAgent[op] && agent >= 0:
			t.Errorf("%s runs no agent, yet has AGENT_IMAGE %v", op, c.Env[agent])
		}
		if c.Image != "ghcr.io/cairn-dev/"+op+"-operator:latest" {
			t.Errorf("%s: image %s", op, c.Image)
		}
		for path, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port != intstr.FromInt32(8081) {
				t.Errorf("%s: probe %s is %+v", op, path, p)
			}
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if c.Resources.Requests.Name(r, "").IsZero() || c.Resources.Limits.Name(r, "").IsZero() {
				t.Errorf("%s: no %s request or limit", op, r)
			}
		}
		if len(d.Spec.Template.Spec.TopologySpreadConstraints) == 0 {
			t.Errorf("%s: no topology spread", op)
		}
		podLabels := labels.Set(d.Spec.Template.Labels)
		for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
			if tsc.LabelSelector == nil || !labels.SelectorFromSet(tsc.LabelSelector.MatchLabels).Matches(podLabels) {
				t.Errorf("%s: topology spread on %s does not select the pods", op, tsc.TopologyKey)
			}
		}

		// Services reach the named ports.
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for svcName, want := range map[string]int32{"cairn-" + op + "-webhook-service": 9443, "cairn-" + op + "-metrics-service": 8443} {
			var svc corev1.Service
			into(t, find(t, objs, "Service", svcName), &svc)
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
				t.Errorf("%s: Service %s does not select the manager's pods", op, svcName)
			}
			if len(svc.Spec.Ports) != 1 || ports[svc.Spec.Ports[0].TargetPort.StrVal] != want {
				t.Errorf("%s: Service %s does not reach port %d: %+v", op, svcName, want, svc.Spec.Ports)
			}
		}

		// The ServiceAccount exists and is bound to the generated ClusterRole
		// and the leader-election Role.
		find(t, objs, "ServiceAccount", d.Spec.Template.Spec.ServiceAccountName)
		for _, b := range ofKind(objs, "ClusterRoleBinding", "RoleBinding") {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				sm := s.(map[string]any)
				if sm["name"] != d.Spec.Template.Spec.ServiceAccountName || sm["namespace"] != "cairn-system" {
					t.Errorf("%s: %s %s binds %v, not the operator's ServiceAccount", op, b.GetKind(), b.GetName(), sm)
				}
			}
		}
		find(t, objs, "ClusterRoleBinding", "cairn-"+op+"-manager")
		find(t, objs, "RoleBinding", "cairn-"+op+"-leader-election")

		// The webhook certificate: cert-manager writes the Secret the manager
		// mounts at --webhook-cert-dir, for the webhook Service's DNS name.
		certDir, _ := arg(c, "--webhook-cert-dir")
		var cert certificate
		into(t, find(t, objs, "Certificate", "cairn-"+op+"-serving-cert"), &cert)
		var iss issuer
		into(t, find(t, objs, "Issuer", cert.Spec.IssuerRef.Name), &iss)
		if cert.APIVersion != "cert-manager.io/v1" || iss.APIVersion != "cert-manager.io/v1" || iss.Spec.SelfSigned == nil || cert.Spec.IssuerRef.Kind != "Issuer" {
			t.Errorf("%s: Certificate %+v / Issuer %+v", op, cert, iss)
		}
		if !slices.Contains(cert.Spec.DNSNames, "cairn-"+op+"-webhook-service.cairn-system.svc") {
			t.Errorf("%s: certificate DNS names %v", op, cert.Spec.DNSNames)
		}
		mounted := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName {
				for _, m := range c.VolumeMounts {
					mounted = mounted || (m.Name == v.Name && m.MountPath == certDir && m.ReadOnly)
				}
			}
		}
		if certDir == "" || !mounted {
			t.Errorf("%s: Secret %s is not mounted read-only at --webhook-cert-dir %q", op, cert.Spec.SecretName, certDir)
		}

		// Every webhook calls this operator's webhook Service and gets its CA
		// from the Certificate.
		inject := "cairn-system/" + cert.Metadata.Name
		whs := ofKind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
		if len(whs) != 2 {
			t.Errorf("%s: %d webhook configurations, want 2", op, len(whs))
		}
		for _, o := range whs {
			if !strings.HasPrefix(o.GetName(), "cairn-"+op+"-") {
				t.Errorf("%s: webhook configuration %s is not named for its operator", op, o.GetName())
			}
			if o.GetAnnotations()["cert-manager.io/inject-ca-from"] != inject {
				t.Errorf("%s: %s %s has no CA injection from %s", op, o.GetKind(), o.GetName(), inject)
			}
			if o.GetKind() == "ValidatingWebhookConfiguration" {
				var w admissionregistrationv1.ValidatingWebhookConfiguration
				into(t, o, &w)
			} else {
				var w admissionregistrationv1.MutatingWebhookConfiguration
				into(t, o, &w)
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			if len(hooks) == 0 {
				t.Errorf("%s: %s has no webhooks", op, o.GetName())
			}
			for _, h := range hooks {
				svc, _, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
				if svc["name"] != "cairn-"+op+"-webhook-service" || svc["namespace"] != "cairn-system" {
					t.Errorf("%s: %s calls service %v", op, o.GetName(), svc)
				}
			}
		}

		// Namespaced objects land in cairn-system.
		for _, o := range objs {
			if o.GetNamespace() != "" && o.GetNamespace() != "cairn-system" {
				t.Errorf("%s: %s %s in namespace %s", op, o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
}

// TestBackupCRDConversion: the backup CRD serves v1alpha1 through the
// conversion webhook at /convert with an injected CA; the restore CRD has
// one version and no webhook conversion.
func TestBackupCRDConversion(t *testing.T) {
	objs := build(t, "deploy/backup")
	var crd apiextensionsv1.CustomResourceDefinition
	into(t, find(t, objs, "CustomResourceDefinition", "backupjobs.backup.cairn.dev"), &crd)
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
		t.Fatalf("conversion %+v", conv)
	}
	svc := conv.Webhook.ClientConfig.Service
	if svc.Name != "cairn-backup-webhook-service" || svc.Namespace != "cairn-system" || svc.Path == nil || *svc.Path != "/convert" {
		t.Errorf("conversion webhook service %+v", svc)
	}
	if !slices.Contains(conv.Webhook.ConversionReviewVersions, "v1") {
		t.Errorf("conversionReviewVersions %v", conv.Webhook.ConversionReviewVersions)
	}
	if crd.Annotations["cert-manager.io/inject-ca-from"] != "cairn-system/cairn-backup-serving-cert" {
		t.Errorf("CRD annotations %v", crd.Annotations)
	}
	served := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		served[v.Name] = v.Served
		if v.Storage && v.Name != "v1" {
			t.Errorf("storage version %s, want v1", v.Name)
		}
	}
	if !served["v1"] || !served["v1alpha1"] {
		t.Errorf("served versions %v", served)
	}
}

// TestPlatform: one install in cairn-system with every operator pinned to its
// own version, the agent pinned, common labels on every object, and the
// namespace enforcing restricted Pod Security.
func TestPlatform(t *testing.T) {
	objs := build(t, "platform")
	ns := find(t, objs, "Namespace", "cairn-system")
	if ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels %v", ns.GetLabels())
	}
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != "cairn-system" {
			t.Errorf("%s %s in namespace %s", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if l := o.GetLabels(); l["app.kubernetes.io/part-of"] != "cairn" || l["app.kubernetes.io/instance"] != "cairn" {
			t.Errorf("%s %s lacks the common labels: %v", o.GetKind(), o.GetName(), l)
		}
	}
	ds := ofKind(objs, "Deployment")
	if len(ds) != len(operators) {
		t.Fatalf("%d Deployments, want one per operator (%v)", len(ds), operators)
	}
	for _, op := range operators {
		var d appsv1.Deployment
		into(t, find(t, objs, "Deployment", "cairn-"+op+"-controller-manager"), &d)
		c := d.Spec.Template.Spec.Containers[0]
		img, tag, _ := strings.Cut(c.Image, ":")
		if img != "ghcr.io/cairn-dev/"+op+"-operator" || tag == "" || tag == "latest" {
			t.Errorf("%s: image %s is not pinned", op, c.Image)
		}
		for _, e := range c.Env {
			if e.Name == "AGENT_IMAGE" {
				if _, tag, _ := strings.Cut(e.Value, ":"); tag == "" || tag == "latest" {
					t.Errorf("%s: agent image %s is not pinned", op, e.Value)
				}
			}
		}
		// Selectors keep the bases' labels only, so a label change in the
		// platform never needs a Deployment to be recreated.
		if _, ok := d.Spec.Selector.MatchLabels["app.kubernetes.io/instance"]; ok {
			t.Errorf("%s: the platform's labels reached the Deployment selector", op)
		}
	}
}

// TestNetworkPolicy: the component's policy selects every operator pod and
// lets webhook traffic in.
func TestNetworkPolicy(t *testing.T) {
	objs := build(t, overlay(t, []string{"platform"}, []string{"platform/components/network-policy"}))
	var np networkingv1.NetworkPolicy
	into(t, find(t, objs, "NetworkPolicy", "cairn-operators"), &np)
	sel := labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels)
	for _, op := range operators {
		var d appsv1.Deployment
		into(t, find(t, objs, "Deployment", "cairn-"+op+"-controller-manager"), &d)
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("the NetworkPolicy does not select %s's pods", op)
		}
	}
	webhook := false
	for _, in := range np.Spec.Ingress {
		for _, p := range in.Ports {
			webhook = webhook || (p.Port != nil && p.Port.IntVal == 9443 && len(in.From) == 0)
		}
	}
	if !webhook {
		t.Error("the NetworkPolicy blocks the API server's webhook calls on 9443")
	}
}
