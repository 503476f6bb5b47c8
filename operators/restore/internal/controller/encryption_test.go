package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/references"
	"cairn.dev/libs/testing/testenv"
)

// identity is an age X25519 private key (age-keygen; a test key only).
const identity = "AGE-SECRET-KEY-1F778UWWZNAX9A67H9U8QLH0ST9505VFN544W548Y5YMTWXEZGJHSSR5RTN"

// An encrypted restore's Job gets the identity by reference, waits for the
// identity Secret and its key, and a restore the agent refused for its key
// is Failed with the agent's failure code as reason and the recipients in
// the message — decided on the code, not the words.
func TestEncryptedRestore(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	ctx := context.Background()
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)

	for _, tc := range []struct{ name, code, reason string }{
		{"mismatch", contract.CodeEncryptionIdentityMismatch, restorev1.RestoreJobEncryptionIdentityMismatchReason},
		{"missing", contract.CodeEncryptionIdentityMissing, restorev1.RestoreJobEncryptionIdentityMissingReason},
		{"other", "", cairnv1.FailedReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			secret := "dr-key-" + tc.name
			rj := restoreJob(ns, "enc-"+tc.name, fromBackupJob("orders-db", ""))
			rj.Spec.Encryption = &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: secret, Key: "identity"}}
			g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
			// No Secret yet: nothing runs.
			g.Eventually(func(g Gomega) {
				c := conditions.Get(current(g, rj), cairnv1.StalledCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(cairnv1.ReferenceNotFoundReason))
				g.Expect(c.Message).To(ContainSubstring("spec.encryption.identitySecretRef"))
			}).WithTimeout(timeout).Should(Succeed())
			g.Expect(jobs(g, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", rj.JobName())))
			// Not an age identity (issue 47 item 13): stalled before any
			// Job, naming the line and the field, never the value.
			bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
				StringData: map[string]string{"identity": "# dr key\n" + identity + "\nage1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n"}}
			g.Expect(env.Client.Create(ctx, bad)).To(Succeed())
			g.Eventually(func(g Gomega) {
				c := conditions.Get(current(g, rj), cairnv1.StalledCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(references.InvalidKeysReason))
				g.Expect(c.Message).To(And(ContainSubstring("spec.encryption.identitySecretRef"),
					ContainSubstring("line 3 (key 2) is not an age X25519 private key"), Not(ContainSubstring(identity[16:]))))
			}).WithTimeout(timeout).Should(Succeed())
			g.Expect(jobs(g, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", rj.JobName())))
			bad.StringData = map[string]string{"identity": identity + "\n"}
			g.Expect(env.Client.Update(ctx, bad)).To(Succeed())
			job := waitForJob(t, rj)
			var id *corev1.EnvVar
			for i, e := range job.Spec.Template.Spec.Containers[0].Env {
				if e.Name == contract.EnvEncryptionIdentity {
					id = &job.Spec.Template.Spec.Containers[0].Env[i]
				}
			}
			g.Expect(id).NotTo(BeNil())
			g.Expect(id.Value).To(BeEmpty())
			g.Expect(id.ValueFrom.SecretKeyRef.Name).To(Equal(secret))
			g.Expect(id.ValueFrom.SecretKeyRef.Key).To(Equal("identity"))

			reason := "restore failed: artifact prod/x.pgdump.zst.age is encrypted to age-fp:0123456789abcdef (age1xyz); the target database was not touched"
			testenv.AgentPod(t, env.Client, job, 1, contract.ExitUsage, string(contract.FailureLine(reason, tc.code)))
			testenv.UpdateJobStatus(t, env.Client, job, func(s *batchv1.JobStatus) {
				now := metav1.Now()
				s.Failed, s.Active = 1, 0
				s.Conditions = []batchv1.JobCondition{
					{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now, LastProbeTime: now},
					{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now, LastProbeTime: now},
				}
			})
			g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
			stalled := conditions.Get(current(g, rj), cairnv1.StalledCondition)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Reason).To(Equal(tc.reason))
			g.Expect(stalled.Message).To(ContainSubstring("age-fp:0123456789abcdef"))
		})
	}
	_ = g
}
