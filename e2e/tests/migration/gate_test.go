package migration_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/e2e/fixtures"
)

// holdPods makes the API server of c refuse every pod of a migration step in
// namespace ns until release is called (fixtures.HoldPods): the step's Job
// can be created (the operator records and creates it as usual) but runs
// nothing. This pins a migration between two steps without racing it: once
// the held step's Job exists, the steps before it have succeeded (the
// operator creates a step's Job only after its predecessors succeeded) and
// the held step has not read or written anything yet.
func holdPods(t *testing.T, g Gomega, c client.Client, ns, step string) (release func()) {
	return fixtures.HoldPods(t, g, c, ns, map[string]string{migrationv1.StepLabel: step})
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
