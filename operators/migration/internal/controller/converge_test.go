package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

// A Continuous verification that ends with a table still catching up (the
// source kept writing it through every re-check) does not fail: the
// migration is ReadyForCutover, status shows the table's state and lag,
// and replication's lag in bytes and seconds.
func TestContinuousCatchingUpIsReady(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "moving", "1Gi")
	mj.Spec.Cutover.Mode = migrationv1.CutoverManual
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "moving-precheck"), contract.MigrationResult{Tables: 2})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "moving-copy"), contract.MigrationResult{TablesDone: 2, Bytes: 100})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "moving-repl-start"), contract.MigrationResult{Replication: replication(0, 0)})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "moving-verify"), contract.MigrationResult{Verification: &contract.Verification{
		Method: "Checksum", Tables: 2, Matched: 1, CatchingUp: 1, Rechecks: 10, Items: []contract.TableCheck{
			{Table: "public.events", SourceRows: 300100, TargetRows: 300080, Reason: "rows differ", State: contract.StateCatchingUp, Rechecks: 10, Rows: 3, LagBytes: 8192},
			{Table: "public.users", SourceRows: 10, TargetRows: 10, Match: true, State: contract.StateMatched},
		}}})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))
	v := current(g, mj).Status.Verification
	g.Expect(v.Summary).To(Equal("1/2 tables match (Checksum), 1 catching up"))
	g.Expect(v.CatchingUp).To(Equal(int32(1)))
	g.Expect(v.Items[0]).To(And(HaveField("State", contract.StateCatchingUp), HaveField("Rechecks", int32(10)), HaveField("LagBytes", int64(8192))))
	g.Expect(condition(g, mj, migrationv1.VerifiedCondition).Status).To(BeEquivalentTo("True"))
	rs := contract.MigrationResult{Replication: replication(8192, 1<<20)}
	rs.Replication.LagSeconds = 0.4121
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "moving-rstatus-0"), rs)
	g.Eventually(func(g Gomega) *migrationv1.ReplicationStatus { return current(g, mj).Status.Replication }).WithTimeout(timeout).
		Should(And(HaveField("LagBytes", int64(8192)), HaveField("LagSeconds", "0.412")))
}

// A Continuous cutover whose exact check (replication-stop, once the
// target applied everything written before the stop) finds a table
// different: nothing is switched, the abort drops replication and undoes
// the read-only, and the migration fails naming the table.
func TestContinuousExactCheckFailsCutover(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := continuousJob(ns, "exact", "1Gi")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, SourceReadOnly: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	copyAndVerify(t, ns, "exact")
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "exact-cutover"), contract.MigrationResult{Actions: []string{"source database orders is read-only"}})
	bad := verification("Checksum", []string{"public.a", "public.b"}, map[string]string{"public.b": "content differs"})
	bad.Items[0].State = contract.StateDiffers
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "exact-repl-stop"), contract.MigrationResult{Replication: replication(0, 1<<20), Verification: bad})
	abort := testenv.WaitForJob(t, env.Client, ns, "exact-abort")
	ro, _ := envOf(abort, contract.EnvCutoverSourceReadOnly)
	g.Expect(ro).To(Equal("true"), "the abort undoes the read-only")
	completeStep(t, env.Client, abort, contract.MigrationResult{Replication: replication(0, 0)})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Message).To(And(ContainSubstring("the target differs from the source"), ContainSubstring("public.b (content differs"),
		ContainSubstring("nothing was switched")))
	g.Expect(secretHost(g, ns)).To(Equal("orders-db.shop.svc"), "never switched")
	g.Expect(current(g, mj).Status.Verification.Summary).To(Equal("1/2 tables differ (Checksum) at cutover, writes stopped"))
}
