package webhook

import (
	"path/filepath"
	"strings"
	"testing"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testing/testenv"
)

// TestDefaultsWithoutWebhooks: a BackupJob created while no Cairn webhook is
// installed (an install run with --enable-webhooks=false, or the operator
// down) is stored with the same spec, field by field, as one created through
// the defaulting webhook — and both equal the API's defaults
// (backupv1.BackupJobSpec.SetDefaults). The API server applies them itself:
// the CRD's +kubebuilder:default markers, and the port from the deploy base's
// MutatingAdmissionPolicy.
func TestDefaultsWithoutWebhooks(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	testenv.ApplyYAML(t, h.c, filepath.Join(root, "deploy", "backup", "admission", "port_default.yaml"))
	newBackupJob := func(name string, e cairnv1.DatabaseEngine) *backupv1.BackupJob {
		bj := h.postgres(name)
		bj.Spec.Database.Engine = e
		return bj
	}
	testenv.CheckDefaults(t, testenv.Defaults[*backupv1.BackupJob]{
		Client: h.c, Engines: []cairnv1.DatabaseEngine{cairnv1.PostgresEngine, cairnv1.MySQLEngine},
		New: newBackupJob, Spec: func(bj *backupv1.BackupJob) any { return bj.Spec },
		Want: func(t *testing.T, e cairnv1.DatabaseEngine) any {
			want := newBackupJob("want", e).Spec
			want.SetDefaults()
			if want.Database.Port == 0 || want.TimeZone == "" {
				t.Fatalf("%s: SetDefaults left fields empty: %+v", e, want)
			}
			return want
		},
		Ports:     func(bj *backupv1.BackupJob) []int32 { return []int32{bj.Spec.Database.Port} },
		Finalizer: backupv1.CleanupFinalizer,
		// The CRD alone refuses a store path in MigrationJobs' key space
		// (libs/validation.MigrationSpace): no webhook is needed for that.
		WithoutWebhooks: func(t *testing.T) {
			for field, st := range map[string]cairnv1.StorageSpec{
				"subPath": {PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "a/./_migrations"}},
				"prefix":  {S3: &cairnv1.S3Storage{Endpoint: "s3.example", Bucket: "backups", Prefix: "prod/_migrations/", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
			} {
				bj := h.postgres("reserved-" + strings.ToLower(field))
				bj.Spec.Storage = st
				err := h.c.Create(ctx, bj)
				if err == nil || !strings.Contains(err.Error(), field+`: the path segment "_migrations" is reserved for MigrationJob exports`) {
					t.Errorf("%s in the migration space without webhooks: %v, want refused by the CRD", field, err)
				}
			}
		},
	})
}
