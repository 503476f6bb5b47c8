package controller_test

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

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
	testenv.CheckDefaults(t, testenv.Defaults[*migrationv1.MigrationJob]{
		Client: env.Client, Engines: []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine},
		New: mk, Spec: func(mj *migrationv1.MigrationJob) any { return mj.Spec },
		Want: func(t *testing.T, e cairnv1.DatabaseEngine) any {
			want := mk("want", e).Spec
			want.SetDefaults()
			if want.Source.Port != cairnv1.DefaultPort(e) {
				t.Fatalf("%s: SetDefaults gave the source port %d", e, want.Source.Port)
			}
			return want
		},
		Ports:     func(mj *migrationv1.MigrationJob) []int32 { return []int32{mj.Spec.Source.Port, mj.Spec.Target.Port} },
		Finalizer: migrationv1.CleanupFinalizer,
	})
}
