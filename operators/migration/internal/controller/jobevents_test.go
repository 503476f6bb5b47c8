package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
)

// A step's Job that finishes while the operator is down is seen by the
// restarted operator with no later event, and the next step starts; the
// operator's cache holds Jobs without their spec.
func TestStepFinishedWhileTheOperatorWasDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "down")
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	job := testenv.WaitForJob(t, env.Client, ns, "down-precheck")
	g.Eventually(func(g Gomega) bool {
		st := current(g, mj).Status.Step(contract.StepPrecheck)
		return st != nil && st.Created() && st.Phase == migrationv1.StepRunning
	}).WithTimeout(timeout).Should(BeTrue())

	cached := &batchv1.Job{}
	g.Expect(op.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(job), cached)).To(Succeed())
	g.Expect(cached.Spec.Template.Spec.Containers).To(BeEmpty(), "the cache keeps the Job's spec")
	g.Expect(cached.Labels).To(HaveKeyWithValue(migrationv1.MigrationJobUIDLabel, string(current(g, mj).UID)))
	g.Expect(op.Stop()).To(Succeed())

	completeStep(t, env.Client, job, contract.MigrationResult{Tables: 2})

	startOperator(t)
	testenv.WaitForJob(t, env.Client, ns, "down-copy")
	g.Expect(current(g, mj).Status.Step(contract.StepPrecheck).Phase).To(Equal(migrationv1.StepSucceeded))
}

// A Job created by a pass whose status write was lost (the step recorded,
// not marked created) is found, never duplicated: the operator goes on with
// it.
func TestJobOfALostStatusWriteIsFoundNotDuplicated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t)
	ns := namespace(t)
	mj := migrationJob(ns, "lost")
	mj.Spec.Source.CredentialsSecretRef.Name = "late-credentials"
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	g.Eventually(message(mj, cairnv1.StalledCondition)).WithTimeout(timeout).Should(ContainSubstring("late-credentials"))
	g.Expect(op.Stop()).To(Succeed())

	// As the lost pass left things: the step recorded, its Job created,
	// the status saying it was created never written.
	cur := current(g, mj)
	job, err := controller.DesiredFirstJob(cur, agentImage, scheme())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	g.Eventually(func() error {
		cur := &migrationv1.MigrationJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mj), cur); err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Phase, cur.Status.StartTime = migrationv1.PhasePrechecking, &now
		cur.Status.Steps = []migrationv1.StepStatus{{Step: contract.StepPrecheck, AgentRun: cairnv1.AgentRun{JobName: job.Name},
			Cluster: migrationv1.ClusterLocal, Namespace: ns, Phase: migrationv1.StepPending}}
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(env.Secret(ctx, ns, "late-credentials", "username", "password")).To(Succeed())

	startOperator(t)
	g.Eventually(func(g Gomega) bool {
		st := current(g, mj).Status.Step(contract.StepPrecheck)
		return st != nil && st.Created() && st.Phase == migrationv1.StepRunning
	}).WithTimeout(timeout).Should(BeTrue())
	g.Consistently(func(g Gomega) []string {
		var uids []string
		for _, j := range testenv.Jobs(g, env.Client, ns) {
			uids = append(uids, j.Name+"/"+string(j.UID))
		}
		return uids
	}).WithTimeout(time.Second).Should(ConsistOf(job.Name + "/" + string(job.UID)))
}

// A Job with a step's name that is not the MigrationJob's (no labels: not
// even in the operator's cache) is never adopted nor duplicated: the
// MigrationJob is Stalled, NotControlled.
func TestForeignJobWithTheStepsNameIsNotAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t)
	ns := namespace(t)
	foreign := testenv.ForeignJob(ns, "taken-precheck")
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	mj := migrationJob(ns, "taken")
	g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
	g.Eventually(func(g Gomega) string {
		c := condition(g, mj, cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		return c.Reason
	}).WithTimeout(timeout).Should(Equal(cairnv1.NotControlledReason))
	g.Expect(jobNames(env.Client, ns)(g)).To(ConsistOf("taken-precheck"))
	live := &batchv1.Job{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), live)).To(Succeed())
	g.Expect(live.Labels).NotTo(HaveKey(migrationv1.MigrationJobUIDLabel))
}
