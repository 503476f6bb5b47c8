package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Rotating an installed operator's webhook certificate the way
// docs/install.md ("Without cert-manager") tells a user to: the new CA
// added to the caBundles, the TLS Secret replaced (the managers reload the
// certificate from disk), the old CA dropped.

// SetWebhookCA sets bundle (PEM, one CA or more) as the caBundle of every
// webhook that calls operator name's webhook Service — in the mutating and
// validating webhook configurations and the CRDs' conversion webhooks — and
// returns how many it set.
func SetWebhookCA(ctx context.Context, c client.Client, name string, bundle []byte) (int, error) {
	svc := WebhookServiceName(name)
	calls := func(ref *admissionregistrationv1.ServiceReference) bool {
		return ref != nil && ref.Namespace == Namespace && ref.Name == svc
	}
	n := 0
	mwcs := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mwcs); err != nil {
		return n, err
	}
	for i := range mwcs.Items {
		w := &mwcs.Items[i]
		patch, set := client.MergeFrom(w.DeepCopy()), 0
		for j := range w.Webhooks {
			if calls(w.Webhooks[j].ClientConfig.Service) {
				w.Webhooks[j].ClientConfig.CABundle, set = bundle, set+1
			}
		}
		if set > 0 {
			if err := c.Patch(ctx, w, patch); err != nil {
				return n, fmt.Errorf("platform: the caBundle of %s: %w", w.Name, err)
			}
			n += set
		}
	}
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, vwcs); err != nil {
		return n, err
	}
	for i := range vwcs.Items {
		w := &vwcs.Items[i]
		patch, set := client.MergeFrom(w.DeepCopy()), 0
		for j := range w.Webhooks {
			if calls(w.Webhooks[j].ClientConfig.Service) {
				w.Webhooks[j].ClientConfig.CABundle, set = bundle, set+1
			}
		}
		if set > 0 {
			if err := c.Patch(ctx, w, patch); err != nil {
				return n, fmt.Errorf("platform: the caBundle of %s: %w", w.Name, err)
			}
			n += set
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return n, err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		conv := crd.Spec.Conversion
		if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil || conv.Webhook.ClientConfig.Service == nil {
			continue
		}
		if s := conv.Webhook.ClientConfig.Service; s.Namespace != Namespace || s.Name != svc {
			continue
		}
		patch := client.MergeFrom(crd.DeepCopy())
		conv.Webhook.ClientConfig.CABundle = bundle
		if err := c.Patch(ctx, crd, patch); err != nil {
			return n, fmt.Errorf("platform: the conversion caBundle of %s: %w", crd.Name, err)
		}
		n++
	}
	return n, nil
}

// SetWebhookCert replaces operator name's webhook certificate Secret with
// certs (the serving certificate and key in certs.Dir, and its CA).
func SetWebhookCert(ctx context.Context, c client.Client, name string, certs *Certs) error {
	crt, err := os.ReadFile(filepath.Join(certs.Dir, "tls.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(certs.Dir, "tls.key"))
	if err != nil {
		return err
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: webhookCertSecret(name)}, s); err != nil {
		return err
	}
	s.Data = map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": certs.CA}
	return c.Update(ctx, s)
}

// WebhookCertSecret reads operator name's webhook certificate Secret.
func WebhookCertSecret(ctx context.Context, c client.Client, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: webhookCertSecret(name)}, s)
}

// ServedCert returns the certificate a webhook server at addr (a pod's
// address and its webhook port) presents, without verifying it.
func ServedCert(addr string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the certificate, not trusting it
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, fmt.Errorf("platform: %s presented no certificate", addr)
	}
	return certs[0], nil
}

// LeafCert parses the serving certificate in certs.Dir.
func LeafCert(certs *Certs) (*x509.Certificate, error) {
	b, err := os.ReadFile(filepath.Join(certs.Dir, "tls.crt"))
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("platform: no PEM in %s/tls.crt", certs.Dir)
	}
	return x509.ParseCertificate(blk.Bytes)
}
