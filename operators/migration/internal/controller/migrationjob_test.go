package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
)

// A Full, direct migration goes through every phase: one Job per step, each
// recorded in status first; verification per table in status; a Manual
// cutover waits for approval, then does exactly what the spec declares
// (source read-only, the app's Secret switched) and says so in status and
// Events.
func TestFullDirectMigrationWithManualCutover(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "orders")
	mj.Spec.Cutover = migrationv1.CutoverSpec{SourceReadOnly: true, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	// Defaults and the finalizer come from the mutating webhook.
	g.Expect(mj.Finalizers).To(ContainElement(migrationv1.CleanupFinalizer))
	g.Expect(mj.Spec.Target.Port).To(Equal(int32(5432)))
	g.Expect(mj.Spec.Mode).To(Equal(migrationv1.ModeFull))
	g.Expect(mj.Spec.Verify).To(Equal(migrationv1.VerifyChecksum))
	g.Expect(mj.Spec.Transfer.Method).To(Equal(migrationv1.TransferDirect))
	g.Expect(*mj.Spec.Transfer.Parallelism).To(Equal(int32(4)))
	g.Expect(mj.Spec.Cutover.Mode).To(Equal(migrationv1.CutoverManual))

	// Precheck.
	job := testenv.WaitForJob(t, env.Client, ns, "orders-precheck")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhasePrechecking))
	g.Expect(metav1.IsControlledBy(job, current(g, mj))).To(BeTrue())
	g.Expect(job.Labels).To(HaveKeyWithValue(migrationv1.MigrationJobLabel, "orders"))
	g.Expect(job.Labels).To(HaveKeyWithValue(migrationv1.StepLabel, contract.StepPrecheck))
	g.Expect(job.Spec.Template.Labels).To(HaveKeyWithValue(migrationv1.MigrationJobUIDLabel, string(current(g, mj).UID)))
	c := job.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal(agentImage))
	g.Expect(c.Args).To(Equal([]string{"migrate", "precheck"}))
	for name, want := range map[string]string{
		"CAIRN_ENGINE": "postgres", "CAIRN_DB_HOST": "orders-db.shop.svc", "CAIRN_DB_NAME": "orders",
		"CAIRN_DB_PASSWORD":             "secret:source-credentials/password",
		contract.EnvTargetHost:          "orders-db-v16.shop.svc",
		contract.EnvTargetPort:          "5432",
		contract.EnvTargetName:          "orders",
		contract.EnvTargetUser:          "secret:target-credentials/username",
		contract.EnvTargetPassword:      "secret:target-credentials/password",
		contract.EnvMigration:           ns + "/orders",
		contract.EnvMode:                "Full",
		contract.EnvInclude:             "public.*",
		contract.EnvExclude:             "public.audit_*",
		contract.EnvParallel:            "4",
		contract.EnvVerify:              "Checksum",
		contract.EnvAllowNonEmptyTarget: "false",
		// precheck checks the privileges cutover's read-only needs
		contract.EnvCutoverSourceReadOnly: "true",
	} {
		got, ok := envOf(job, name)
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(got).To(Equal(want), name)
	}
	g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	cur := current(g, mj)
	g.Expect(cur.Status.Steps).To(HaveLen(1))
	g.Expect(cur.Status.Steps[0].JobName).To(Equal("orders-precheck"))
	g.Expect(cur.Status.StartTime).NotTo(BeNil())
	g.Expect(kstatusOf(mj)(g)).To(Equal(status.InProgressStatus))
	completeStep(t, env.Client, job, contract.MigrationResult{SourceVersion: "15.4", TargetVersion: "16.2", Tables: 3, EstimatedBytes: 1 << 20})

	// Copy.
	job = testenv.WaitForJob(t, env.Client, ns, "orders-copy")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCopying))
	cur = current(g, mj)
	g.Expect(cur.Status.Precheck).To(Equal(&migrationv1.PrecheckResult{Passed: true, SourceVersion: "15.4", TargetVersion: "16.2", Tables: 3, EstimatedBytes: 1 << 20}))
	g.Expect(cur.Status.Progress.TablesTotal).To(Equal(int32(3)))
	g.Expect(condition(g, mj, migrationv1.PrecheckedCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"migrate", "copy"}))
	completeStep(t, env.Client, job, contract.MigrationResult{TablesDone: 3, Bytes: 3 << 20,
		Actions:  []string{"rows copied on 4 connections in one snapshot"},
		Warnings: []string{"table public.audit has no primary key"}})

	// Verify.
	job = testenv.WaitForJob(t, env.Client, ns, "orders-verify")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseVerifying))
	cur = current(g, mj)
	g.Expect(cur.Status.Progress).To(Equal(migrationv1.Progress{TablesDone: 3, TablesTotal: 3, Bytes: 3 << 20}))
	// The agent's report of the step is kept; a warning is also an Event.
	g.Expect(cur.Status.Step(contract.StepCopy).Actions).To(Equal([]string{"rows copied on 4 connections in one snapshot"}))
	g.Expect(cur.Status.Step(contract.StepCopy).Warnings).To(Equal([]string{"table public.audit has no primary key"}))
	g.Eventually(eventNotes(ns, "orders", controller.AgentWarningReason)).WithTimeout(timeout).Should(ConsistOf(
		"step copy: table public.audit has no primary key"))
	g.Expect(condition(g, mj, migrationv1.CopiedCondition).Status).To(Equal(metav1.ConditionTrue))
	completeStep(t, env.Client, job, contract.MigrationResult{Verification: verification("Checksum",
		[]string{"public.customers", "public.items", "public.orders"}, nil)})

	// Waits for approval; no cutover Job meanwhile.
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseReadyForCutover))
	g.Eventually(func(g Gomega) string { return condition(g, mj, migrationv1.CutOverCondition).Reason }).
		WithTimeout(timeout).Should(Equal(migrationv1.AwaitingApprovalReason))
	cur = current(g, mj)
	g.Expect(cur.Status.Verification.Summary).To(Equal("3/3 tables match (Checksum)"))
	g.Expect(cur.Status.Verification.Items).To(ContainElement(migrationv1.TableVerification{Table: "public.orders", SourceRows: 100, TargetRows: 100, Match: true}))
	g.Expect(condition(g, mj, migrationv1.VerifiedCondition).Status).To(Equal(metav1.ConditionTrue))
	ready := condition(g, mj, cairnv1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(migrationv1.AwaitingApprovalReason))
	g.Expect(ready.Message).To(ContainSubstring("set spec.cutover.approved to true"))
	g.Expect(ready.Message).To(ContainSubstring("make the source read-only"))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("orders-precheck", "orders-copy", "orders-verify"))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(string(sec.Data["host"])).To(Equal("orders-db.shop.svc"), "not switched before approval")

	// Approve: the cutover Job makes the source read-only, then the Secret is switched.
	approve(t, mj)
	job = testenv.WaitForJob(t, env.Client, ns, "orders-cutover")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCuttingOver))
	got, _ := envOf(job, contract.EnvCutoverSourceReadOnly)
	g.Expect(got).To(Equal("true"))
	_, hasTarget := envOf(job, contract.EnvTargetHost)
	g.Expect(hasTarget).To(BeTrue(), "cutover compares the source with the target again")
	completeStep(t, env.Client, job, contract.MigrationResult{Actions: []string{"ended 2 other sessions on orders"},
		Verification: verification("Checksum", []string{"public.customers", "public.items", "public.orders"}, nil)})

	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseSucceeded))
	cur = current(g, mj)
	g.Expect(cur.Status.CompletionTime).NotTo(BeNil())
	g.Expect(cur.Status.Cutover.Actions).To(ConsistOf(
		"made the source postgres orders-db.shop.svc:5432/orders read-only",
		"compared the source again with writes stopped: 3/3 tables match (Checksum)",
		"switched Secret app-db to postgres orders-db-v16.shop.svc:5432/orders",
		"source: ended 2 other sessions on orders"))
	g.Expect(cur.Status.Verification.Summary).To(Equal("3/3 tables match (Checksum) at cutover, writes stopped"))
	g.Expect(condition(g, mj, migrationv1.CutOverCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(kstatusOf(mj)(g)).To(Equal(status.CurrentStatus))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(sec.Data).To(Equal(map[string][]byte{"host": []byte("orders-db-v16.shop.svc"), "port": []byte("5432"),
		"database": []byte("orders"), "sslmode": []byte("require")}), "host, port, database switched; other keys kept")
	g.Expect(cur.Status.Steps).To(HaveLen(4))
	for _, st := range cur.Status.Steps {
		g.Expect(st.Phase).To(Equal(migrationv1.StepSucceeded), st.Step)
		g.Expect(st.CompletionTime).NotTo(BeNil(), st.Step)
	}
	g.Eventually(testenv.EventReasons(env.Client, ns, "MigrationJob", "orders")).WithTimeout(timeout).Should(ContainElements(
		"Normal/"+migrationv1.StepRunningReason, "Normal/"+migrationv1.AwaitingApprovalReason, "Normal/"+cairnv1.SucceededReason, "Normal/"+controller.CutoverEventReason))
	g.Eventually(eventNotes(ns, "orders", controller.CutoverEventReason)).WithTimeout(timeout).Should(ConsistOf(
		"made the source postgres orders-db.shop.svc:5432/orders read-only; compared the source again with writes stopped: 3/3 tables match (Checksum); switched Secret app-db to postgres orders-db-v16.shop.svc:5432/orders; source: ended 2 other sessions on orders"))

	// Deletion removes the Jobs (the finalizer).
	g.Expect(env.Client.Delete(ctx, mj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, mj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(jobNames(env.Client, ns)).WithTimeout(timeout).Should(BeEmpty())
}

// Problems the precheck finds fail the migration before any data moves,
// with a condition naming them.
func TestPrecheckProblemsFail(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "blocked")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	job := testenv.WaitForJob(t, env.Client, ns, "blocked-precheck")
	completeStep(t, env.Client, job, contract.MigrationResult{Tables: 2, Problems: []string{
		"target already has table public.orders", "user app lacks SELECT on public.secrets"}})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	pc := condition(g, mj, migrationv1.PrecheckedCondition)
	g.Expect(pc.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(pc.Message).To(ContainSubstring("target already has table public.orders"))
	g.Expect(pc.Message).To(ContainSubstring("user app lacks SELECT on public.secrets"))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.PrecheckFailedReason))
	g.Expect(st.Message).To(ContainSubstring("nothing was copied"))
	g.Expect(current(g, mj).Status.Precheck.Problems).To(HaveLen(2))
	g.Expect(kstatusOf(mj)(g)).To(Equal(status.FailedStatus))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("blocked-precheck"))
}

// spec.dryRun stops after a passing precheck: Succeeded, reason DryRun.
func TestDryRunStopsAfterPrecheck(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "dry")
	mj.Spec.DryRun = true
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	job := testenv.WaitForJob(t, env.Client, ns, "dry-precheck")
	completeStep(t, env.Client, job, contract.MigrationResult{Tables: 7, EstimatedBytes: 4096})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseSucceeded))
	ready := condition(g, mj, cairnv1.ReadyCondition)
	g.Expect(ready.Reason).To(Equal(migrationv1.DryRunReason))
	g.Expect(ready.Message).To(ContainSubstring("7 table(s)"))
	g.Expect(ready.Message).To(ContainSubstring("nothing was copied"))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("dry-precheck"))
}

// A verification mismatch fails the migration naming the tables; no
// cutover happens.
func TestVerificationMismatchFails(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "mismatch")
	mj.Spec.Cutover = migrationv1.CutoverSpec{Mode: migrationv1.CutoverAuto, SwitchSecret: &cairnv1.LocalObjectReference{Name: "app-db"}}
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "mismatch-precheck"), contract.MigrationResult{Tables: 3})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "mismatch-copy"), contract.MigrationResult{TablesDone: 3, Bytes: 10})
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "mismatch-verify"), contract.MigrationResult{Verification: verification("Checksum",
		[]string{"public.a", "public.b", "public.c"}, map[string]string{"public.b": "content differs", "public.c": "only on target"})})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	v := condition(g, mj, migrationv1.VerifiedCondition)
	g.Expect(v.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(v.Reason).To(Equal(migrationv1.VerificationFailedReason))
	g.Expect(v.Message).To(And(ContainSubstring("2 of 3 table(s) differ"), ContainSubstring("public.b (content differs"), ContainSubstring("public.c (only on target")))
	g.Expect(v.Message).NotTo(ContainSubstring("public.a"))
	cur := current(g, mj)
	g.Expect(cur.Status.Verification.Summary).To(Equal("2/3 tables differ (Checksum)"))
	g.Expect(cur.Status.Verification.Items[0]).To(Equal(migrationv1.TableVerification{Table: "public.b", SourceRows: 100, TargetRows: 99, Reason: "content differs"}))
	g.Expect(condition(g, mj, cairnv1.StalledCondition).Message).To(ContainSubstring("no cutover was done"))
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("mismatch-precheck", "mismatch-copy", "mismatch-verify"))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app-db"}, sec)).To(Succeed())
	g.Expect(string(sec.Data["host"])).To(Equal("orders-db.shop.svc"), "never switched")
}

// A failed step fails the migration with the agent's reason.
func TestStepFailure(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "broken")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "broken-precheck"), contract.MigrationResult{Tables: 1})
	failStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "broken-copy"), 3, "pg_restore: connection to target refused")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.StepFailedReason))
	g.Expect(st.Message).To(And(ContainSubstring("step copy"), ContainSubstring("connection to target refused"), ContainSubstring("3 attempt(s)")))
	g.Expect(current(g, mj).Status.Step("copy").Phase).To(Equal(migrationv1.StepFailed))
}

// The operator killed while a step runs finds the same Job when it comes
// back: no second Job, and the migration goes on from there.
func TestRestartMidCopyingFindsTheSameJob(t *testing.T) {
	g := NewWithT(t)
	op := startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "restart")
	mj.Spec.Verify = migrationv1.VerifyNone
	mj.Spec.Cutover.Mode = migrationv1.CutoverAuto
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	completeStep(t, env.Client, testenv.WaitForJob(t, env.Client, ns, "restart-precheck"), contract.MigrationResult{Tables: 2})
	copyJob := testenv.WaitForJob(t, env.Client, ns, "restart-copy")
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseCopying))
	g.Expect(op.Stop()).To(Succeed())

	startOperator(t)
	// The new operator looks at the running copy and leaves it alone.
	g.Consistently(func(g Gomega) []string {
		var uids []string
		for _, j := range testenv.Jobs(g, env.Client, ns) {
			uids = append(uids, j.Name+"/"+string(j.UID))
		}
		return uids
	}).WithTimeout(2 * time.Second).Should(ConsistOf(
		"restart-precheck/"+string(testenv.WaitForJob(t, env.Client, ns, "restart-precheck").UID), "restart-copy/"+string(copyJob.UID)))
	completeStep(t, env.Client, copyJob, contract.MigrationResult{TablesDone: 2, Bytes: 2048})
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseSucceeded))
	g.Expect(condition(g, mj, migrationv1.VerifiedCondition).Reason).To(Equal(migrationv1.VerificationSkippedReason))
	g.Expect(jobNames(env.Client, ns)(g)).To(ConsistOf("restart-precheck", "restart-copy"), "no cutover Job: nothing declared")
	g.Expect(current(g, mj).Status.Cutover.Actions).To(ConsistOf(ContainSubstring("nothing declared")))
}

// A step's Job deleted before it finished fails the migration (it is not
// started again behind the user's back: the target may be partly written).
func TestJobDeletedMidStep(t *testing.T) {
	g := NewWithT(t)
	startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "deleted")
	g.Expect(env.Client.Create(context.Background(), mj)).To(Succeed())
	job := testenv.WaitForJob(t, env.Client, ns, "deleted-precheck")
	g.Eventually(func(g Gomega) bool {
		st := current(g, mj).Status.Step("precheck")
		return st != nil && st.Created()
	}).WithTimeout(timeout).Should(BeTrue())
	g.Expect(env.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	g.Eventually(phaseOf(mj)).WithTimeout(timeout).Should(Equal(migrationv1.PhaseFailed))
	st := condition(g, mj, cairnv1.StalledCondition)
	g.Expect(st.Reason).To(Equal(migrationv1.JobDeletedReason))
	g.Expect(st.Message).To(ContainSubstring("deleted-precheck was deleted before it finished"))
}

// A step recorded in status whose Job does not exist yet (the operator was
// stopped between the checkpoint and the create) gets its Job under the
// recorded name, once — the name in status is the one that counts.
func TestRecordedStepGetsItsJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "resume")
	mj.Spec.Source.CredentialsSecretRef.Name = "late-credentials"
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	g.Eventually(message(mj, cairnv1.StalledCondition)).WithTimeout(timeout).Should(ContainSubstring("late-credentials"))
	g.Expect(op.Stop()).To(Succeed())

	// As a stopped operator would have left it: the step and its Job's
	// name recorded, no Job created.
	g.Eventually(func() error {
		cur := &migrationv1.MigrationJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase, cur.Status.StartTime = migrationv1.PhasePrechecking, &now
		cur.Status.Steps = []migrationv1.StepStatus{{Step: contract.StepPrecheck, AgentRun: cairnv1.AgentRun{JobName: "resume-precheck-recorded"},
			Cluster: migrationv1.ClusterLocal, Namespace: ns, Phase: migrationv1.StepPending}}
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(env.Secret(ctx, ns, "late-credentials", "username", "password")).To(Succeed())

	startOperator(t)
	job := testenv.WaitForJob(t, env.Client, ns, "resume-precheck-recorded")
	g.Consistently(jobNames(env.Client, ns)).WithTimeout(time.Second).Should(ConsistOf("resume-precheck-recorded"))
	completeStep(t, env.Client, job, contract.MigrationResult{Tables: 1})
	testenv.WaitForJob(t, env.Client, ns, "resume-copy")
	g.Expect(current(g, mj).Status.Step(contract.StepPrecheck).Phase).To(Equal(migrationv1.StepSucceeded))
}
