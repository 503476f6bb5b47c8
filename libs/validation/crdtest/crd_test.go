package crdtest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{
		filepath.Join(root, "deploy", "backup", "crd", "bases"),
		filepath.Join(root, "deploy", "restore", "crd", "bases"),
	}}, &env)
}

func database(name, host string) map[string]any {
	return map[string]any{"engine": "postgres", "host": host, "database": name,
		"credentialsSecretRef": map[string]any{"name": "creds"}}
}

func backupJob(db map[string]any, storage map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "backup.cairn.dev/v1", "kind": "BackupJob",
		"metadata": map[string]any{"name": "orders", "namespace": "default"},
		"spec":     map[string]any{"database": db, "schedule": "0 2 * * *", "storage": storage},
	}}
}

func restoreJob(target map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "restore.cairn.dev/v1", "kind": "RestoreJob",
		"metadata": map[string]any{"name": "orders", "namespace": "default"},
		"spec": map[string]any{"source": map[string]any{"backupJob": map[string]any{"name": "orders"}},
			"target": target},
	}}
}

func pvc(subPath string) map[string]any {
	return map[string]any{"pvc": map[string]any{"claimName": "backups", "subPath": subPath}}
}

func s3(mut func(map[string]any)) map[string]any {
	s := map[string]any{"endpoint": "http://minio.storage.svc:9000", "bucket": "backups", "prefix": "prod/",
		"region": "us-east-1", "credentialsSecretRef": map[string]any{"name": "s3"}}
	mut(s)
	return map[string]any{"s3": s}
}

func alphaBackupJob(host string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "backup.cairn.dev/v1alpha1", "kind": "BackupJob",
		"metadata": map[string]any{"name": "orders", "namespace": "default"},
		"spec":     map[string]any{"databaseHost": host, "schedule": "0 2 * * *"},
	}}
}

// Each hostile value is refused by the schema alone, with a message that
// names the field; the valid objects next to them are accepted.
func TestSchemaRefusesHostileValues(t *testing.T) {
	ok := database("orders", "db.shop.svc")
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want string // "" = accepted
	}{
		{"valid backup", backupJob(ok, pvc("shop/orders")), ""},
		{"valid s3 backup", backupJob(database("Shop.orders_v2-$", "10.0.0.7"), s3(func(map[string]any) {})), ""},
		{"valid ipv6 host", backupJob(database("orders", "fd00::7"), pvc("")), ""},
		{"valid restore", restoreJob(database("orders_restored", "db")), ""},
		{"option name", backupJob(database("-h evil", "db"), pvc("")), "spec.database.database"},
		{"all databases", restoreJob(database("--all-databases", "db")), "spec.target.database"},
		{"conninfo name", restoreJob(database("dbname=prod host=evil", "db")), "spec.target.database"},
		{"uri name", backupJob(database("postgresql://evil/prod", "db"), pvc("")), "spec.database.database"},
		{"quote name", backupJob(database("x' host='y", "db"), pvc("")), "spec.database.database"},
		{"newline name", backupJob(database("x\n\\! id", "db"), pvc("")), "spec.database.database"},
		{"postgres 64", backupJob(database(strings.Repeat("a", 64), "db"), pvc("")), "spec.database.database: Invalid value"},
		{"option host", backupJob(database("orders", "-h"), pvc("")), "spec.database.host"},
		{"socket host", restoreJob(database("orders", "/var/run/postgresql")), "spec.target.host"},
		{"host list", backupJob(database("orders", "a,b"), pvc("")), "spec.database.host"},
		{"host parameter", backupJob(database("orders", "db port=1"), pvc("")), "spec.database.host"},
		{"alpha host", alphaBackupJob("-h evil"), "spec.databaseHost"},
		{"subPath control", backupJob(ok, pvc("a\x01b")), "spec.storage.pvc.subPath"},
		{"prefix dotdot", backupJob(ok, s3(func(s map[string]any) { s["prefix"] = "a/../b" })), "spec.storage.s3.prefix"},
		{"prefix absolute", backupJob(ok, s3(func(s map[string]any) { s["prefix"] = "/a" })), "spec.storage.s3.prefix"},
		{"bucket option", backupJob(ok, s3(func(s map[string]any) { s["bucket"] = "-bucket" })), "spec.storage.s3.bucket"},
		{"region", backupJob(ok, s3(func(s map[string]any) { s["region"] = "us east" })), "spec.storage.s3.region"},
		{"endpoint credentials", backupJob(ok, s3(func(s map[string]any) { s["endpoint"] = "http://u:p@minio:9000" })), "spec.storage.s3.endpoint"},
		{"endpoint path", backupJob(ok, s3(func(s map[string]any) { s["endpoint"] = "http://minio:9000/x" })), "spec.storage.s3.endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), tt.obj, client.DryRunAll)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want an error naming %s", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %v does not name %s", err, tt.want)
			}
			if err != nil {
				t.Logf("%v", err)
			}
		})
	}
}
