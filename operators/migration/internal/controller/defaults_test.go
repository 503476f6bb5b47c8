package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

// A MigrationJob created while no webhook is installed (an install with
// --enable-webhooks=false, or the operator down) is stored with the same
// spec, field by field, as one created through the defaulting webhook, and
// both equal the API's defaults (MigrationJobSpec.SetDefaults): the CRD's
// defaults and the base's port MutatingAdmissionPolicy, for both engines.
func TestDefaultsWithoutWebhooks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	startOperator(t)
	ns := namespace(t)
	testenv.ApplyYAML(t, env.Client, filepath.Join(root, "deploy", "migration", "admission", "port_default.yaml"))
	mk := func(name string, e cairnv1.DatabaseEngine) *migrationv1.MigrationJob {
		mj := migrationJob(ns, name)
		mj.Spec.Source.Engine, mj.Spec.Target.Engine, mj.Spec.Source.Port = e, e, 0
		mj.Spec.Target.KubeconfigSecretRef = &migrationv1.KubeconfigSecretRef{Name: "elsewhere"}
		mj.Spec.Cutover = migrationv1.CutoverSpec{SourceReadOnly: true} // partly given: mode still defaulted
		return mj
	}
	engines := []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine}

	hooks := testenv.TakeWebhooks(t, env.Client)
	reinstalled := false
	reinstall := func() {
		if reinstalled {
			return
		}
		reinstalled = true
		for _, h := range hooks {
			g.Expect(env.Client.Create(ctx, h)).To(Succeed())
		}
	}
	t.Cleanup(reinstall)
	g.Eventually(func() error {
		probe := mk("probe", cairnv1.PostgresEngine)
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if len(probe.Finalizers) > 0 || probe.Spec.Source.Port == 0 || probe.Spec.Target.Port == 0 {
			return fmt.Errorf("finalizers %q, ports %d %d", probe.Finalizers, probe.Spec.Source.Port, probe.Spec.Target.Port)
		}
		return nil
	}).WithTimeout(timeout).Should(Succeed(), "the API server admits without webhooks, with the port policy")
	plain := map[cairnv1.DatabaseEngine]*migrationv1.MigrationJob{}
	for _, e := range engines {
		mj := mk("plain-"+string(e), e)
		g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
		plain[e] = current(g, mj)
	}
	reinstall()
	g.Eventually(func() error {
		probe := mk("probe", cairnv1.PostgresEngine)
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if !slices.Contains(probe.Finalizers, migrationv1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %q", probe.Finalizers)
		}
		return nil
	}).WithTimeout(timeout).Should(Succeed(), "the API server calls the webhooks again")
	for _, e := range engines {
		mj := mk("hooked-"+string(e), e)
		g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
		hooked := current(g, mj)
		want := mk("want", e).Spec
		want.SetDefaults()
		g.Expect(want.Source.Port).To(Equal(cairnv1.DefaultPort(e)))
		g.Expect(testenv.FieldDiff("spec", plain[e].Spec, hooked.Spec)).To(BeEmpty(), "%s: without webhooks vs through them", e)
		g.Expect(testenv.FieldDiff("spec", want, plain[e].Spec)).To(BeEmpty(), "%s: API defaults vs without webhooks", e)
	}
}
