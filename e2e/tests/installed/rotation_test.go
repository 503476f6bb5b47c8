package installed_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

// webhookPort is the manager's webhook port (its container's port named
// webhook, as shipped).
const webhookPort = "9443"

// The backup operator's webhook certificate rotated to a new CA as
// docs/install.md ("Without cert-manager") tells a user to, while both
// replicas keep running: the new CA added beside the old one in every
// caBundle (the webhooks and the CRD's conversion webhook), the TLS Secret
// replaced — each replica serves the new certificate once the kubelet (the
// pod runner) has updated the mounted Secret and the manager reloaded it
// from disk, without a restart — then the old CA dropped. Admission (the
// defaulting and the validating webhook) and conversion (a v1alpha1 read)
// work at every step.
func TestWebhookCertificateRotation(t *testing.T) {
	g := NewWithT(t)
	before := runningPods(t, g)
	slices.Sort(before)
	ns := fixtures.Namespace(t, k8s, "e2e-rotate-")
	n := 0
	admits := func(g Gomega, step string) {
		n++
		bj := fixtures.BackupJob(ns, fmt.Sprintf("db-%d", n), fixtures.Yearly, "db.example", 1)
		g.Expect(k8s.Create(ctx, bj)).To(Succeed(), "%s: admitted", step)
		g.Expect(bj.Finalizers).NotTo(BeEmpty(), "%s: defaulted by the mutating webhook", step)
		bad := fixtures.BackupJob(ns, fmt.Sprintf("bad-%d", n), fixtures.Yearly, "db.example", 1)
		bad.Spec.TimeZone = "Mars/Olympus_Mons"
		err := k8s.Create(ctx, bad)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("Mars/Olympus_Mons"), "%s: refused by the validating webhook, not for a TLS error", step)
		old := &backupv1alpha1.BackupJob{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(bj), old)).To(Succeed(), "%s: read as v1alpha1 through the conversion webhook", step)
		g.Expect(old.Spec.Schedule).To(Equal(fixtures.Yearly))
	}
	served := func(g Gomega) map[string][]byte {
		pods, err := install.OperatorPods(ctx, k8s, operator)
		g.Expect(err).NotTo(HaveOccurred())
		out := map[string][]byte{}
		for _, p := range pods {
			c, err := install.ServedCert(net.JoinHostPort(p.Status.PodIP, webhookPort))
			g.Expect(err).NotTo(HaveOccurred(), "pod %s", p.Name)
			out[p.Name] = c.Raw
		}
		return out
	}
	admits(g, "before")
	sec, err := install.WebhookCertSecret(ctx, k8s, operator)
	g.Expect(err).NotTo(HaveOccurred())
	oldCA := sec.Data["ca.crt"]
	g.Expect(oldCA).NotTo(BeEmpty())
	installed, _ := pem.Decode(sec.Data["tls.crt"])
	g.Expect(installed).NotTo(BeNil())
	for pod, raw := range served(g) {
		g.Expect(fingerprint(raw)).To(Equal(fingerprint(installed.Bytes)), "%s serves the installed certificate", pod)
	}

	// 1. Both CAs trusted.
	certs, err := install.WebhookCerts(t.TempDir(), []string{operator})
	g.Expect(err).NotTo(HaveOccurred())
	next := certs[operator]
	set, err := install.SetWebhookCA(ctx, k8s, operator, append(append([]byte{}, oldCA...), next.CA...))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set).To(BeNumerically(">=", 3), "the mutating and validating webhooks and the CRD's conversion webhook")
	admits(g, "both CAs trusted")

	// 2. The Secret replaced: every replica serves the new certificate,
	// reloaded from disk, while admission goes on.
	leaf, err := install.LeafCert(next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(install.SetWebhookCert(ctx, k8s, operator, next)).To(Succeed())
	replaced := time.Now()
	g.Eventually(func(g Gomega) {
		admits(g, "while the replicas reload")
		for pod, raw := range served(g) {
			g.Expect(fingerprint(raw)).To(Equal(fingerprint(leaf.Raw)), "%s serves the new certificate", pod)
		}
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("both replicas serve the new certificate %s after the Secret was replaced", time.Since(replaced).Round(100*time.Millisecond))
	after := runningPods(t, g)
	slices.Sort(after)
	g.Expect(after).To(Equal(before), "no replica was restarted or replaced")

	// 3. The old CA dropped.
	_, err = install.SetWebhookCA(ctx, k8s, operator, next.CA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(func(g Gomega) { admits(g, "the new CA only") }).WithTimeout(10 * time.Second).WithPolling(2 * time.Second).Should(Succeed())
}

// fingerprint is a certificate's SHA-256, in hex.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}
