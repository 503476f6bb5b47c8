package migration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
)

// holdMessage is what the API server answers for a held pod.
const holdMessage = "held by the e2e test"

// holdPods makes the API server of c refuse every pod of a migration step in
// namespace ns — a ValidatingAdmissionPolicy and its binding matching the
// step label — until release is called. The step's Job can be created (the
// operator records and creates it as usual) but runs nothing: the Job
// controller's pod creations are refused and retried. This pins a migration
// between two steps without racing it: once the held step's Job exists, the
// steps before it have succeeded (the operator creates a step's Job only
// after its predecessors succeeded) and the held step has not read or
// written anything yet. It returns once the policy is in force (a dry-run pod
// of the step is refused); release returns once it is lifted. A test that
// ends without releasing lifts it in Cleanup.
func holdPods(t *testing.T, g Gomega, c client.Client, ns, step string) (release func()) {
	ctx := context.Background()
	name := "e2e-hold-" + ns + "-" + step
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: holdMessage + ": pods of step " + step}},
		},
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{migrationv1.StepLabel: step}},
			},
		},
	}
	g.Expect(c.Create(ctx, pol)).To(Succeed())
	g.Expect(c.Create(ctx, bind)).To(Succeed())
	held := func() (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-hold-probe", Labels: map[string]string{migrationv1.StepLabel: step}},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "probe", Image: "probe.invalid/none"}}},
		}
		err := c.Create(ctx, pod, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), holdMessage) {
			return true, nil
		}
		return false, err
	}
	g.Eventually(held).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(BeTrue(), "the hold on step %s is in force", step)
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		for _, o := range []client.Object{bind, pol} {
			g.Expect(client.IgnoreNotFound(c.Delete(ctx, o))).To(Succeed())
		}
		g.Eventually(func() bool { h, _ := held(); return h }).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).
			Should(BeFalse(), "the hold on step %s is lifted", step)
	}
	t.Cleanup(func() {
		if !released {
			released = true
			_ = c.Delete(ctx, bind)
			_ = c.Delete(ctx, pol)
		}
	})
	return release
}

// waitJob waits until mj's Job of step exists in namespace ns of c and
// returns it; mj ending first fails.
func waitJob(g Gomega, c client.Client, mj *migrationv1.MigrationJob, ns, step string) {
	g.Eventually(func(g Gomega) int {
		if p := get(g, mj).Status.Phase; p == migrationv1.PhaseSucceeded || p == migrationv1.PhaseFailed {
			StopTrying("the migration ended (" + string(p) + ") before its " + step + " Job was created").Now()
		}
		l := &batchv1.JobList{}
		g.Expect(c.List(context.Background(), l, client.InNamespace(ns),
			client.MatchingLabels{migrationv1.MigrationJobUIDLabel: string(mj.UID), migrationv1.StepLabel: step})).To(Succeed())
		return len(l.Items)
	}).WithTimeout(5*time.Minute).WithPolling(200*time.Millisecond).Should(Equal(1), "the %s Job exists", step)
}
