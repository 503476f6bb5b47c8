package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/testing/testenv"
)

// annotate merge-patches the approval annotation of mj to value (nil
// removes it).
func annotate(mj *migrationv1.MigrationJob, value any) error {
	raw := `{"metadata":{"annotations":{"` + access.Annotation + `":null}}}`
	if s, ok := value.(string); ok {
		raw = `{"metadata":{"annotations":{"` + access.Annotation + `":"` + s + `"}}}`
	}
	return env.Client.Patch(context.Background(), mj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(raw)))
}

// withoutWebhooks removes the installed webhook configurations until the
// test ends: what an install without the webhook, or one bypassing it,
// can write.
func withoutWebhooks(t *testing.T) {
	hooks := testenv.TakeWebhooks(t, env.Client)
	t.Cleanup(func() {
		for _, h := range hooks {
			if err := env.Client.Create(context.Background(), h); err != nil {
				t.Errorf("reinstalling webhook configuration %s: %v", h.GetName(), err)
			}
		}
	})
}

// TestTheApprovalOfARunningMigrationStaysAndSafetyWorkDoesNotWaitForIt
// (issue 47 item 3): removing or changing the approval annotation of a
// replicating Continuous MigrationJob is refused at admission, even for
// the cluster admin. Removed anyway (no webhook), nothing new starts, but
// the replication watchdog still runs and aborts above the retained-WAL
// limit, dropping the slot; and a deletion still stops replication before
// the finalizer lets the object go.
func TestTheApprovalOfARunningMigrationStaysAndSafetyWorkDoesNotWaitForIt(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "unsigned", "1Gi")
	bye := continuousJob(ns, "unsigned-bye", "1Gi")
	for _, m := range []*migrationv1.MigrationJob{mj, bye} {
		g.Expect(env.Client.Create(context.Background(), m)).To(Succeed())
		copyAndVerify(t, ns, m.Name)
		g.Eventually(phaseOf(m)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))
	}
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unsigned-rstatus-0"), contract.MigrationResult{Replication: replication(0, 1<<20)})
	next := testenv.WaitForJob(t, env.Client, ns, "unsigned-rstatus-1")

	for what, value := range map[string]any{"removing": nil, "changing": "v2.forged"} {
		err := annotate(mj, value)
		g.Expect(err).To(HaveOccurred(), what+" the approval was admitted")
		g.Expect(err.Error()).To(ContainSubstring("an update may not remove or change it"), what)
	}
	g.Expect(current(g, mj).Annotations).To(HaveKey(access.Annotation))

	withoutWebhooks(t)
	for _, m := range []*migrationv1.MigrationJob{mj, bye} {
		g.Expect(annotate(m, nil)).To(Succeed())
	}
	g.Eventually(func(g Gomega) string { return condition(g, mj, cairnv1.ReadyCondition).Reason }).WithTimeout(timeout).
		Should(Equal(cairnv1.ReferencesNotApprovedReason))

	// The watchdog reads the next check: over the limit, it aborts.
	completeStep(t, env.Client, next, contract.MigrationResult{Replication: replication(1<<30, 2<<30)})
	stop := testenv.WaitForJob(t, env.Client, ns, "unsigned-abort")
	completeStep(t, env.Client, stop, contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	g.Expect(condition(g, mj, cairnv1.StalledCondition).Reason).To(Equal(migrationv1.RetainedWALLimitReason))
	g.Expect(current(g, mj).Status.Replication.Stopped).To(BeTrue())

	// A deletion stops replication, then lets the object go.
	g.Expect(env.Client.Delete(context.Background(), bye)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "unsigned-bye-abort"), contract.MigrationResult{})
	g.Eventually(testenv.Gone(env.Client, bye)).WithTimeout(timeout).Should(BeTrue())
}
