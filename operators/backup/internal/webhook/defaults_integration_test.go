package webhook

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

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

	inputs := map[string]func(name string) *backupv1.BackupJob{
		"postgres": h.postgres,
		"mysql": func(name string) *backupv1.BackupJob {
			bj := h.postgres(name)
			bj.Spec.Database.Engine = cairnv1.MySQLEngine
			return bj
		},
	}

	// Without webhooks: remove the configurations envtest installed (kept
	// to put back), and wait until the API server neither calls the webhook
	// (no finalizer added) and applies the port policy.
	hooks := testenv.TakeWebhooks(t, h.c)
	testenv.Poll(t, 30*time.Second, "the API server to admit without webhooks, with the port policy", func() error {
		probe := h.postgres("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if len(probe.Finalizers) > 0 || probe.Spec.Database.Port == 0 {
			return fmt.Errorf("finalizers %q, port %d", probe.Finalizers, probe.Spec.Database.Port)
		}
		return nil
	})
	plain := map[string]*backupv1.BackupJob{}
	for engine, in := range inputs {
		bj := in("plain-" + engine)
		if err := h.c.Create(ctx, bj); err != nil {
			t.Fatalf("%s without webhooks: %v", engine, err)
		}
		plain[engine] = get(t, h.c, bj)
	}

	// The CRD alone refuses a store path in MigrationJobs' key space
	// (libs/validation.MigrationSpace): no webhook is needed for that.
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

	// Through the webhooks.
	for _, o := range hooks {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Poll(t, 30*time.Second, "the API server to call the webhooks again", func() error {
		probe := h.postgres("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if !slices.Contains(probe.Finalizers, backupv1.CleanupFinalizer) {
			return fmt.Errorf("finalizers %q", probe.Finalizers)
		}
		return nil
	})
	for engine, in := range inputs {
		bj := in("hooked-" + engine)
		if err := h.c.Create(ctx, bj); err != nil {
			t.Fatalf("%s through the webhooks: %v", engine, err)
		}
		hooked := get(t, h.c, bj)

		want := in("want").Spec
		want.SetDefaults()
		for _, d := range testenv.FieldDiff("spec", plain[engine].Spec, hooked.Spec) {
			t.Errorf("%s: without webhooks vs through them: %s", engine, d)
		}
		for _, d := range testenv.FieldDiff("spec", want, plain[engine].Spec) {
			t.Errorf("%s: API defaults vs without webhooks: %s", engine, d)
		}
		if want.Database.Port == 0 || want.TimeZone == "" {
			t.Fatalf("%s: SetDefaults left fields empty: %+v", engine, want)
		}
	}
}

func get(t *testing.T, c client.Client, bj *backupv1.BackupJob) *backupv1.BackupJob {
	t.Helper()
	got := &backupv1.BackupJob{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(bj), got); err != nil {
		t.Fatal(err)
	}
	return got
}
