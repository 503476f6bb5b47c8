package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/testenv"
)

// agentReport is the agent's termination message after restoring a with
// checks and the drop asked for.
func agentReport(t *testing.T, a cairnv1.Artifact, checks []contract.CheckResult, created, dropped bool, dropErr string) string {
	t.Helper()
	now := time.Now().UTC()
	b, err := contract.MarshalResult(contract.Result{Artifact: a.Path, Size: a.Size, Checksum: a.Checksum,
		Start: now.Add(-3 * time.Second), End: now, DurationSeconds: 3, Engine: "postgres",
		Checks: checks, TargetCreated: created, TargetDropped: dropped, DropError: dropErr})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkedRestoreJob(ns, name string, checks []restorev1.Check) *restorev1.RestoreJob {
	rj := restoreJob(ns, name, fromBackupJob("orders-db", ""))
	rj.Spec.Checks = checks
	rj.Spec.DropTargetAfterChecks = true
	return rj
}

// The agent's check results reach status.checks, with what it did to the
// scratch target. Every check passed: Succeeded. One failed: the RestoreJob
// fails with reason ChecksFailed (condition and Warning Event) and the
// results say which. No results from an agent older than the checks:
// ChecksNotReported. A target that was not dropped: a Warning Event.
func TestChecksReportedIntoStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	newest := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &newest)
	checks := []restorev1.Check{
		{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: ptr.To(int64(1))},
		{Name: "row-counts", RowCountsMatchBackup: true},
	}

	// The checks the Job passes are what the agent decodes.
	rj := checkedRestoreJob(ns, "passed", checks)
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	dec := json.NewDecoder(strings.NewReader(envOf(job, contract.EnvChecks)))
	dec.DisallowUnknownFields()
	var passed []contract.Check
	g.Expect(dec.Decode(&passed)).To(Succeed())
	g.Expect(passed).To(HaveLen(2))
	g.Expect(envOf(job, contract.EnvDropTargetAfterChecks)).To(Equal("true"))

	testenv.CompleteJob(t, env.Client, job, agentReport(t, newest, []contract.CheckResult{
		{Name: "has-orders", Passed: true, Value: "5000"}, {Name: "row-counts", Passed: true, Value: "2 tables, 8000 rows"}}, true, true, ""))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	cur := current(g, rj)
	g.Expect(cur.Status.Checks).To(Equal([]restorev1.CheckResult{
		{Name: "has-orders", Passed: true, Value: "5000"}, {Name: "row-counts", Passed: true, Value: "2 tables, 8000 rows"}}))
	g.Expect(cur.Status.TargetCreated).To(BeTrue())
	g.Expect(cur.Status.TargetDropped).To(BeTrue())
	ready := conditions.Get(cur, cairnv1.ReadyCondition)
	g.Expect(ready.Status).To(BeEquivalentTo("True"))
	g.Expect(ready.Message).To(And(ContainSubstring("2 check(s) passed"), ContainSubstring("the target database was dropped")))

	// One check failed.
	rj = checkedRestoreJob(ns, "failed", checks)
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job = waitForJob(t, rj)
	testenv.CompleteJob(t, env.Client, job, agentReport(t, newest, []contract.CheckResult{
		{Name: "has-orders", Passed: false, Value: "0", Message: "0 is less than 1"}, {Name: "row-counts", Passed: true}}, true, true, ""))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	cur = current(g, rj)
	g.Expect(cur.Status.Checks).To(ContainElement(restorev1.CheckResult{Name: "has-orders", Passed: false, Value: "0", Message: "0 is less than 1"}))
	g.Expect(cur.Status.CompletionTime).NotTo(BeNil())
	g.Expect(cur.Status.TargetDropped).To(BeTrue())
	ready = conditions.Get(cur, cairnv1.ReadyCondition)
	g.Expect(ready.Status).To(BeEquivalentTo("False"))
	g.Expect(ready.Reason).To(Equal(restorev1.RestoreJobChecksFailedReason))
	g.Expect(ready.Message).To(ContainSubstring("1 of 2 check(s) failed: has-orders (0 is less than 1)"))
	g.Expect(conditions.IsTrue(cur, cairnv1.StalledCondition)).To(BeTrue())
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "failed")).WithTimeout(timeout).Should(ContainElement("Warning/" + restorev1.RestoreJobChecksFailedReason))
	g.Expect(testenv.MetricValue(g, "cairn_restorejob_finished_total", map[string]string{"namespace": ns, "result": "Failed"})).To(Equal(1.0))

	// An agent that knows no checks reports none.
	rj = checkedRestoreJob(ns, "old-agent", checks)
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job = waitForJob(t, rj)
	completeJob(t, job, newest)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	ready = conditions.Get(current(g, rj), cairnv1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(restorev1.RestoreJobChecksNotReportedReason))
	g.Expect(ready.Message).To(ContainSubstring("has-orders, row-counts"))

	// The target existed before: checks pass, it is kept, with a warning.
	rj = checkedRestoreJob(ns, "kept", checks[:1])
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job = waitForJob(t, rj)
	testenv.CompleteJob(t, env.Client, job, agentReport(t, newest, []contract.CheckResult{{Name: "has-orders", Passed: true, Value: "3"}}, false, false,
		"the target database existed before the restore (or lost its marker); it is never dropped"))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	cur = current(g, rj)
	g.Expect(cur.Status.TargetCreated).To(BeFalse())
	g.Expect(cur.Status.TargetDropped).To(BeFalse())
	g.Expect(conditions.Get(cur, cairnv1.ReadyCondition).Message).To(ContainSubstring("NOT dropped: the target database existed before"))
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "kept")).WithTimeout(timeout).Should(ContainElement("Warning/" + restorev1.RestoreJobTargetNotDroppedReason))
	g.Expect(testenv.EventReasons(env.Client, ns, "RestoreJob", "passed")(g)).NotTo(ContainElement("Warning/" + restorev1.RestoreJobTargetNotDroppedReason))
}
