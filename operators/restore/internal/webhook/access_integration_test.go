package webhook

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

// TestARestoreFromABackupJobNeedsItsStore (issue 47 item 9): a user bound
// to cairn-edit who may get the target's credentials but not the source
// BackupJob's store credentials cannot restore its backups; with get on
// them, admitted. Then (item 3) nobody — not even the cluster admin — can
// remove or change the admitted RestoreJob's approval.
func TestARestoreFromABackupJobNeedsItsStore(t *testing.T) {
	opts, err := testenv.ForOperator(manager.Operator{Name: "restore",
		AddToScheme: []func(*runtime.Scheme) error{restorev1.AddToScheme, backupv1.AddToScheme}}, "restore", "backup")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, opts)
	env.ServeWebhooks(t, "cairn-restore-approval-key", Setup)
	ctx := t.Context()
	ns, err := env.Namespace(ctx, "restore-store")
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	testenv.ApplyYAML(t, env.Client, filepath.Join(root, "platform", "tenant_roles.yaml"))
	bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-db"}, Spec: backupv1.BackupJobSpec{
		Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "pg-backup"}},
		Schedule: "0 2 * * *",
		Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "https://s3.shop.svc", Bucket: "backups",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-team"}}}}}
	if err := env.Client.Create(ctx, bj); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eve-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "eve"}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Tenant(ctx, ns, "eve", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"eves-db"}, Verbs: []string{"get"}})
	if err != nil {
		t.Fatal(err)
	}
	eve, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	rj := &restorev1.RestoreJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steal"}, Spec: restorev1.RestoreJobSpec{
		Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}},
		Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "evil.example", Database: "stolen",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "eves-db"}}}}
	want := fmt.Sprintf(`spec.source.backupJob.name (BackupJob orders-db's spec.storage.s3.credentialsSecretRef): user "eve" may not get secret "s3-team" in namespace %q`, ns)
	testenv.Poll(t, 30*time.Second, "eve's RestoreJob refused for the store", func() error {
		err := eve.Create(ctx, rj.DeepCopy())
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("got %v, want refused with %q", err, want)
		}
		return nil
	})

	if _, err := env.Tenant(ctx, ns, "eve", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"s3-team"}, Verbs: []string{"get"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "eve's RestoreJob with get on the store admitted", func() error { return eve.Create(ctx, rj) })
	if _, ok := rj.Annotations[access.Annotation]; !ok {
		t.Fatalf("admitted RestoreJob has no approval: %v", rj.Annotations)
	}

	for what, raw := range map[string]string{
		"removing": `{"metadata":{"annotations":{"` + access.Annotation + `":null}}}`,
		"changing": `{"metadata":{"annotations":{"` + access.Annotation + `":"v2.forged"}}}`,
	} {
		err := env.Client.Patch(context.Background(), rj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(raw)))
		if err == nil || !strings.Contains(err.Error(), "an update may not remove or change it") {
			t.Errorf("%s the approval as cluster admin: %v; want refused", what, err)
		}
	}
	// A label is still fine.
	if err := eve.Patch(ctx, rj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`))); err != nil {
		t.Errorf("a label: %v", err)
	}
}
