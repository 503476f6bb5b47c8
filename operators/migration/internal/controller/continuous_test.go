package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
)

func continuousJob(ns, name, maxWAL string) *migrationv1.MigrationJob {
	mj := migrationJob(ns, name)
	mj.Spec.Mode = migrationv1.ModeContinuous
	q := resource.MustParse(maxWAL)
	mj.Spec.Replication = &migrationv1.ReplicationSpec{MaxRetainedWAL: &q}
	return mj
}

func replication(lag, retained int64) *contract.Replication {
	return &contract.Replication{Publication: "cairn_pub_x", Subscription: "cairn_sub_x", Slot: "cairn_slot_x",
		LagBytes: lag, RetainedWALBytes: retained, SyncedTables: 2, Tables: 2}
}

// copyAndVerify takes a MigrationJob through precheck, copy,
// replication-start and verify.
func copyAndVerify(t *testing.T, ns, name string) {
	t.Helper()
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-copy"), contract.MigrationResult{TablesDone: 2, Bytes: 100})
	start := testenv.WaitForJob(t, env.Client, ns, name+"-repl-start")
	got, _ := envOf(start, contract.EnvMaxRetainedWALBytes)
	NewWithT(t).Expect(got).To(Equal("1073741824"))
	completeStep(t, env.Client, start, contract.MigrationResult{Replication: replication(0, 0)})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-verify"), contract.MigrationResult{Verification: verification("Checksum", []string{"public.a", "public.b"}, nil)})
}

// Continuous mode: after the copy, logical replication is started; while
// waiting for approval its lag and retained WAL are checked periodically
// (a new replication-status Job each time, the previous one deleted); the
// cutover stops replication; status.replication shows it all.
func TestContinuousReplicatesUntilCutover(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "cont", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	copyAndVerify(t, ns, "cont")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))

	first := contract.MigrationResult{Replication: replication(4096, 1<<20),
		Warnings: []string{"table public.late is not in the publication: its rows are not replicated"}}
	first.Replication.NotReplicated = []string{"public.late"}
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "cont-rstatus-0"), first)
	g.Eventually(func(g Gomega) *migrationv1.ReplicationStatus { return current(g, mj).Status.Replication }).WithTimeout(timeout).
		Should(And(HaveField("LagBytes", int64(4096)), HaveField("RetainedWALBytes", int64(1<<20)), HaveField("Slot", "cairn_slot_x"),
			HaveField("NotReplicated", []string{"public.late"})))
	g.Eventually(eventNotes(ns, "cont", controller.AgentWarningReason)).WithTimeout(timeout).Should(ConsistOf(
		"step replication-status: table public.late is not in the publication: its rows are not replicated"))
	second := testenv.WaitForJob(t, env.Client, ns, "cont-rstatus-1")
	g.Eventually(jobNames(env.Client, ns)).WithTimeout(timeout).ShouldNot(ContainElement("cont-rstatus-0"), "the checked one is deleted")
	completeStep(t, env.Client, second, contract.MigrationResult{Replication: replication(0, 2<<20)})
	testenv.WaitForJob(t, env.Client, ns, "cont-rstatus-2")
	g.Expect(current(g, mj).Status.Phase).To(Equal(migrationv1.PhaseReadyForCutover))

	approve(t, mj)
	// Approved, but nothing stops the writes: cutover waits for the
	// user's declaration (replication stopped while the source is written
	// would lose the rows written after it).
	g.Eventually(func(g Gomega) string { return condition(g, mj, cairnv1.ReadyCondition).Reason }).WithTimeout(timeout).
		Should(Equal(migrationv1.AwaitingWritersStoppedReason))
	g.Expect(jobNames(env.Client, ns)(g)).NotTo(ContainElement("cont-repl-stop"))
	setWritersStopped(t, mj)
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCuttingOver))
	// replication-stop itself waits until the target applied everything
	// written before the stop, disables the subscription, then copies the
	// sequences.
	stop := testenv.WaitForJob(t, env.Client, ns, "cont-repl-stop")
	wal, _ := envOf(stop, contract.EnvMaxRetainedWALBytes)
	g.Expect(wal).To(Equal("1073741824"), "its wait enforces the limit")
	completeStep(t, env.Client, stop, contract.MigrationResult{Replication: replication(0, 0)})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseSucceeded))
	cur := current(g, mj)
	g.Expect(cur.Status.Replication.Stopped).To(BeTrue())
	g.Expect(cur.Status.Cutover.Actions).To(ContainElement(ContainSubstring("stopped replication")))
}

// Above spec.replication.maxRetainedWAL the migration is aborted: the slot
// is dropped first (the abort step), then it fails with a condition that
// says why.
func TestContinuousAbortsAboveRetainedWALLimit(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "leak", "1Gi")
	mj.Spec.Cutover.Mode = migrationv1.CutoverManual
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	copyAndVerify(t, ns, "leak")
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "leak-rstatus-0"), contract.MigrationResult{Replication: replication(1<<30, 2<<30)})
	stop := testenv.WaitForJob(t, env.Client, ns, "leak-abort")
	g.Expect(current(g, mj).Status.Phase).NotTo(Equal(migrationv1.PhaseFailed), "not failed before the slot is dropped")
	completeStep(t, env.Client, stop, contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.RetainedWALLimitReason))
	g.Expect(st.Message).To(And(ContainSubstring("2147483648 bytes"), ContainSubstring("slot dropped")))
	g.Expect(current(g, mj).Status.Replication.Stopped).To(BeTrue())
}

// The agent's replication-status fails on its own above the limit (it is
// given the limit): same abort.
func TestContinuousAbortsWhenTheAgentReportsTheLimit(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "agentleak", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	copyAndVerify(t, ns, "agentleak")
	failStepWithCode(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "agentleak-rstatus-0"), 1, "retained WAL 2147483648 bytes above limit 1073741824", contract.CodeRetainedWALOverLimit)
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "agentleak-abort"), contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	g.Expect(condition(g, mj, cairnv1.StalledCondition).Reason).To(Equal(migrationv1.RetainedWALLimitReason))
}

// A Continuous MigrationJob deleted while replicating stops replication
// (an abort Job) before its finalizer lets it go.
func TestContinuousDeletionStopsReplication(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "bye", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	copyAndVerify(t, ns, "bye")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))
	g.Expect(env.Client.Delete(context.Background(), mj)).To(Succeed())
	stop := testenv.WaitForJob(t, env.Client, ns, "bye-abort")
	g.Consistently(testenv.Gone(env.Client, mj)).WithTimeout(time.Second).Should(BeFalse(), "held until replication is stopped")
	completeStep(t, env.Client, stop, contract.MigrationResult{})
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(jobNames(env.Client, ns)).WithTimeout(timeout).Should(BeEmpty())
}
