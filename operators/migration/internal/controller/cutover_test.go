package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

// fullToReady takes a Full MigrationJob through precheck, copy and a
// matching verify.
func fullToReady(t *testing.T, ns, name string) {
	t.Helper()
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-copy"), contract.MigrationResult{TablesDone: 2, Bytes: 10})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, name+"-verify"), contract.MigrationResult{Verification: verification("Checksum", []string{"public.a", "public.b"}, nil)})
}

func secretHost(g Gomega, ns string) string {
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	return string(sec.Data["host"])
}

func setWritersStopped(t *testing.T, mj *migrationv1.MigrationJob) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &migrationv1.MigrationJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mj), cur); err != nil {
			return err
		}
		cur.Spec.Cutover.WritersStopped = true
		return env.Client.Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

// A row written to the source after verification: the cutover step, run
// once writes stopped, finds the source changed; the Secret is not
// switched, the migration fails with SourceChanged naming the table, and
// the abort step makes the source writable again.
func TestFullCutoverSourceChangedDoesNotSwitch(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "late")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, SourceReadOnly: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	fullToReady(t, ns, "late")
	cut := testenv.WaitForJob(t, env.Client, ns, "late-cutover")
	completeStep(t, env.Client, cut, contract.MigrationResult{
		Actions:      []string{"the source changed since verification (public.b); nothing may be switched: the source database orders was made writable again"},
		Verification: verification("Checksum", []string{"public.a", "public.b"}, map[string]string{"public.b": "rows differ"})})
	abort := testenv.WaitForJob(t, env.Client, ns, "late-abort")
	ro, _ := envOf(abort, contract.EnvCutoverSourceReadOnly)
	g.Expect(ro).To(Equal("true"), "the abort undoes the read-only")
	g.Expect(current(g, mj).Status.Phase).To(Equal(migrationv1.PhaseCuttingOver), "not Failed before the source is writable again")
	completeStep(t, env.Client, abort, contract.MigrationResult{Actions: []string{"source database orders is writable"}})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	co := condition(g, mj, migrationv1.CutOverCondition)
	g.Expect(co.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(co.Reason).To(Equal(migrationv1.SourceChangedReason))
	g.Expect(co.Message).To(ContainSubstring("public.b (rows differ"))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.SourceChangedReason))
	g.Expect(st.Message).To(And(ContainSubstring("nothing was switched"), ContainSubstring("the source is writable again")))
	g.Expect(secretHost(g, ns)).To(Equal("orders-db.shop.svc"), "never switched")
	g.Expect(current(g, mj).Status.Verification.Summary).To(Equal("1/2 tables differ (Checksum) at cutover, writes stopped"))
}

// A Full cutover that would switch the Secret while nothing stops the
// writes waits, even approved, until the user declares the writers
// stopped; then it compares again and switches.
func TestFullCutoverWaitsUntilWritersStopped(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "mariadb")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	fullToReady(t, ns, "mariadb")
	g.Eventually(func(g Gomega) string { return condition(g, mj, cairnv1.ReadyCondition).Reason }).WithTimeout(timeout).
		Should(Equal(migrationv1.AwaitingWritersStoppedReason))
	g.Expect(message(mj, cairnv1.ReadyCondition)(g)).To(ContainSubstring("set spec.cutover.writersStopped to true"))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("mariadb-precheck", "mariadb-copy", "mariadb-verify"))
	g.Expect(secretHost(g, ns)).To(Equal("orders-db.shop.svc"))

	setWritersStopped(t, mj)
	cut := testenv.WaitForJob(t, env.Client, ns, "mariadb-cutover")
	ro, _ := envOf(cut, contract.EnvCutoverSourceReadOnly)
	g.Expect(ro).To(Equal("false"))
	stopped, _ := envOf(cut, contract.EnvCutoverWritersStopped)
	g.Expect(stopped).To(Equal("true"), "the agent is told the writers are stopped, so it may copy again what changed")
	// The agent found public.b changed, copied it again, compared again.
	completeStep(t, env.Client, cut, contract.MigrationResult{
		Recopied:     []string{"public.b"},
		Actions:      []string{"re-copied 1 table changed since verification: public.b", "compared the source again after writes stopped: 2 table(s) equal to the target (Checksum)"},
		Verification: verification("Checksum", []string{"public.a", "public.b"}, nil)})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseSucceeded))
	g.Expect(secretHost(g, ns)).To(Equal("orders-db-v16.shop.svc"))
	g.Expect(current(g, mj).Status.Cutover.Actions).To(ContainElements(
		"writes to the source declared stopped (spec.cutover.writersStopped)",
		"compared the source again with writes stopped: 2/2 tables match (Checksum)",
		"re-copied 1 table changed since verification: public.b"))
	g.Expect(message(mj, migrationv1.CutOverCondition)(g)).To(ContainSubstring("re-copied 1 table changed since verification: public.b"))
}

// A cutover step that fails halfway (the read-only set, the other
// sessions not ended): the abort step makes the source writable again
// before the migration fails; nothing is switched.
func TestFailedCutoverUndoesReadOnly(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "halfway")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, SourceReadOnly: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	fullToReady(t, ns, "halfway")
	failStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "halfway-cutover"), 3, "end the other sessions on source database \"orders\" (needs pg_signal_backend or a superuser): permission denied")
	abort := testenv.WaitForJob(t, env.Client, ns, "halfway-abort")
	completeStep(t, env.Client, abort, contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.StepFailedReason))
	g.Expect(st.Message).To(And(ContainSubstring("pg_signal_backend"), ContainSubstring("the source is writable again")))
	g.Expect(secretHost(g, ns)).To(Equal("orders-db.shop.svc"))
	g.Expect(testenv.EventReasons(env.Client, ns, "MigrationJob", "halfway")(g)).To(ContainElement("Normal/" + migrationv1.AbortingReason))
}

// A Continuous migration that fails after replication-start (here: verify
// finds a difference) runs the abort step — which drops the slot,
// publication and subscription — before it is Failed.
func TestContinuousFailureAfterReplicationStartAborts(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "vbad", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vbad-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vbad-copy"), contract.MigrationResult{TablesDone: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vbad-repl-start"), contract.MigrationResult{Replication: replication(0, 0)})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vbad-verify"), contract.MigrationResult{
		Verification: verification("Checksum", []string{"public.a", "public.b"}, map[string]string{"public.a": "rows differ"})})
	abort := testenv.WaitForJob(t, env.Client, ns, "vbad-abort")
	g.Expect(current(g, mj).Status.Phase).NotTo(Equal(migrationv1.PhaseFailed), "not Failed while the slot may exist")
	g.Expect(abort.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"migrate", "abort"}))
	_, hasTarget := envOf(abort, contract.EnvTargetHost)
	g.Expect(hasTarget).To(BeTrue(), "the abort drops the subscription on the target")
	ro, _ := envOf(abort, contract.EnvCutoverSourceReadOnly)
	g.Expect(ro).To(Equal("false"), "no cutover ran: the read-only is not touched")
	completeStep(t, env.Client, abort, contract.MigrationResult{Replication: replication(0, 0)})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.VerificationFailedReason))
	g.Expect(st.Message).To(ContainSubstring("slot dropped"))
	g.Expect(current(g, mj).Status.Replication.Stopped).To(BeTrue())
	g.Expect(current(g, mj).Status.Abort).NotTo(BeNil())
}

// A replication-start that fails (e.g. the subscription refused after the
// slot was created) also aborts.
func TestContinuousReplicationStartFailureAborts(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "sfail", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "sfail-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "sfail-copy"), contract.MigrationResult{TablesDone: 2})
	failStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "sfail-repl-start"), 3, "target: create subscription: permission denied")
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "sfail-abort"), contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	g.Expect(condition(g, mj, cairnv1.StalledCondition).Message).To(And(ContainSubstring("create subscription"), ContainSubstring("slot dropped")))
}

// The retained-WAL watchdog runs while verify waits (the slot exists from
// replication-start on): above the limit the migration aborts without
// waiting for verify to end.
func TestContinuousWatchdogWhileVerifying(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "vwal", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vwal-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vwal-copy"), contract.MigrationResult{TablesDone: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vwal-repl-start"), contract.MigrationResult{Replication: replication(0, 0)})
	verify := testenv.WaitForJob(t, env.Client, ns, "vwal-verify")
	wal, _ := envOf(verify, contract.EnvMaxRetainedWALBytes)
	g.Expect(wal).To(Equal("1073741824"), "verify's wait enforces the limit too")
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vwal-rstatus-0"), contract.MigrationResult{Replication: replication(1<<30, 2<<30)})
	g.Expect(current(g, mj).Status.Phase).To(Equal(migrationv1.PhaseVerifying))
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "vwal-abort"), contract.MigrationResult{})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	g.Expect(condition(g, mj, cairnv1.StalledCondition).Reason).To(Equal(migrationv1.RetainedWALLimitReason))
}

// A Continuous MigrationJob deleted while replication-start runs: the
// abort waits until that Job ended (it could create the slot after an
// abort run beside it), then drops what it created.
func TestContinuousDeletionWaitsForReplicationStart(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "racy", "1Gi")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "racy-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "racy-copy"), contract.MigrationResult{TablesDone: 2})
	start := testenv.WaitForJob(t, env.Client, ns, "racy-repl-start")
	g.Eventually(func(g Gomega) bool {
		st := current(g, mj).Status.Step(contract.StepReplicationStart)
		return st != nil && st.Created()
	}).WithTimeout(timeout).Should(BeTrue())
	g.Expect(env.Client.Delete(context.Background(), mj)).To(Succeed())
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(2*time.Second).ShouldNot(ContainElement("racy-abort"), "no abort beside a running replication-start")
	g.Expect(testenv.Gone(env.Client, mj)()).To(BeFalse())
	completeStep(t, env.Client, start, contract.MigrationResult{Replication: replication(0, 0)})
	abort := testenv.WaitForJob(t, env.Client, ns, "racy-abort")
	g.Consistently(testenv.Gone(env.Client, mj)).WithTimeout(time.Second).Should(BeFalse(), "held until the abort succeeded")
	completeStep(t, env.Client, abort, contract.MigrationResult{})
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(jobNames(env.Client, ns)).WithTimeout(timeout).Should(BeEmpty())
}
