package testenv_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/testing/testenv"
)

// WaitForJob returns a Job created while it waits; Jobs lists a
// namespace's Jobs, those its options select; AgentEnv reads the agent
// container's variables by name, secret references included.
func TestJobHelpers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "jobs")
	g.Expect(err).NotTo(HaveOccurred())

	run := testenv.ForeignJob(ns, "run")
	run.Labels = map[string]string{"kind": "run"}
	run.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "CAIRN_STORE", Value: "pvc"},
		{Name: "CAIRN_DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
		{Name: "CAIRN_STORE", Value: "s3"},
	}
	created := make(chan error, 1)
	go func() { created <- env.Client.Create(ctx, run) }()
	job := testenv.WaitForJob(t, env.Client, ns, "run")
	g.Expect(<-created).To(Succeed())
	g.Expect(job.UID).To(Equal(run.UID))
	g.Expect(env.Client.Create(ctx, testenv.ForeignJob(ns, "other"))).To(Succeed())

	g.Expect(testenv.Jobs(g, env.Client, ns)).To(HaveLen(2))
	g.Expect(testenv.Jobs(g, env.Client, ns, client.MatchingLabels{"kind": "run"})).To(ConsistOf(HaveField("ObjectMeta.Name", "run")))
	g.Expect(testenv.Jobs(g, env.Client, "default", client.MatchingLabels{"kind": "run"})).To(BeEmpty())

	e := testenv.AgentEnv(job)
	g.Expect(e).To(HaveLen(2))
	g.Expect(e["CAIRN_STORE"].Value).To(Equal("s3"))
	g.Expect(e["CAIRN_DB_PASSWORD"].ValueFrom.SecretKeyRef.Name).To(Equal("db"))
	g.Expect(e).NotTo(HaveKey("CAIRN_ARTIFACT"))
}
