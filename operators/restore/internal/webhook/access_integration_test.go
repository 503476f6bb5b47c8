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

// TestARestoreJobNeverApprovedIsApprovedByAnUpdate (issue 47 item 3: the
// documented re-approval works for every kind): a RestoreJob created while
// the webhooks were not installed carries no approval; an update through
// them (kubectl annotate … cairn.dev/approve=1) is reviewed as a create —
// refused for a user who may not get the target's Secret — and signs it
// for one who may.
func TestARestoreJobNeverApprovedIsApprovedByAnUpdate(t *testing.T) {
	opts, err := testenv.ForOperator(manager.Operator{Name: "restore",
		AddToScheme: []func(*runtime.Scheme) error{restorev1.AddToScheme, backupv1.AddToScheme}}, "restore", "backup")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, opts)
	mgr := env.ServeWebhooks(t, "cairn-restore-approval-key", Setup)
	guard := access.For(mgr)
	ctx := t.Context()
	ns, err := env.Namespace(ctx, "reapprove")
	if err != nil {
		t.Fatal(err)
	}
	rj := &restorev1.RestoreJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}, Spec: restorev1.RestoreJobSpec{
		Source: restorev1.RestoreSource{Store: &restorev1.StoreSource{Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}},
			BackupJob: ns + "/orders-db", Artifact: "orders-db/20260102T030405Z.pgdump.zst"}},
		Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "scratch.shop.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "admin-db"}}}}
	hooks := testenv.TakeWebhooks(t, env.Client)
	if err := env.Client.Create(ctx, rj); err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		if err := env.Client.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := rj.Annotations[access.Annotation]; ok {
		t.Fatalf("created without the webhooks, yet approved: %v", rj.Annotations)
	}
	cfg, err := env.Tenant(ctx, ns, "eve", rbacv1.PolicyRule{APIGroups: []string{restorev1.GroupVersion.Group}, Resources: []string{"restorejobs"},
		Verbs: []string{"get", "update", "patch"}}, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"},
		ResourceNames: []string{"backups"}, Verbs: []string{"get"}})
	if err != nil {
		t.Fatal(err)
	}
	eve, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	approve := []byte(`{"metadata":{"annotations":{"cairn.dev/approve":"1"}}}`)
	want := fmt.Sprintf(`spec.target.credentialsSecretRef: user "eve" may not get secret "admin-db" in namespace %q`, ns)
	testenv.Poll(t, 30*time.Second, "eve's re-approval refused", func() error {
		err := eve.Patch(ctx, rj.DeepCopy(), client.RawPatch(types.MergePatchType, approve))
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("got %v, want refused with %q", err, want)
		}
		return nil
	})
	if err := env.Client.Patch(ctx, rj, client.RawPatch(types.MergePatchType, approve)); err != nil {
		t.Fatalf("the admin's re-approval: %v", err)
	}
	if !guard.Approver.Approved(rj, access.RestoreJobKind, access.RestoreJobChecks(rj)) {
		t.Fatalf("not approved after the admin's update: %v", rj.Annotations)
	}
}
