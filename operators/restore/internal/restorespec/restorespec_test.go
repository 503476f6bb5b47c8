package restorespec

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

func validSpec() restorev1.RestoreJobSpec {
	s := restorev1.RestoreJobSpec{
		Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}},
		Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "scratch-db.shop.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"}},
	}
	s.SetDefaults()
	return s
}

func storeSource() *restorev1.StoreSource {
	return &restorev1.StoreSource{
		Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "http://minio.storage.svc:9000", Bucket: "backups",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
		BackupJob: "shop/orders-db", Artifact: "shop_orders-db_20260102T030405.123Z.pgdump.zst",
	}
}

func TestValidateSpec(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*restorev1.RestoreJobSpec)
		// want is "" for a valid spec, else "<field path>: <substring of the detail>".
		want string
	}{
		{"valid BackupJob source", func(*restorev1.RestoreJobSpec) {}, ""},
		{"valid named artifact", func(s *restorev1.RestoreJobSpec) { s.Source.BackupJob.Artifact = "shop/orders-db/x.pgdump.zst" }, ""},
		{"valid store source", func(s *restorev1.RestoreJobSpec) { s.Source = restorev1.RestoreSource{Store: storeSource()} }, ""},
		{"valid IP host", func(s *restorev1.RestoreJobSpec) { s.Target.Host = "10.0.0.7" }, ""},
		{"valid check", func(s *restorev1.RestoreJobSpec) {
			s.Checks = []restorev1.Check{{Name: "n", SQL: "SELECT count(*) FROM orders; -- all", AtLeast: new(int64(1))}}
		}, ""},
		{"check running a shell", func(s *restorev1.RestoreJobSpec) {
			s.Checks = []restorev1.Check{{Name: "ok", RowCountsMatchBackup: true}, {Name: "n", SQL: `\! cat /proc/1/environ`, Equals: new("x")}}
		}, "spec.checks[1].sql: Invalid value"},
		{"check with two statements", func(s *restorev1.RestoreJobSpec) {
			s.Checks = []restorev1.Check{{Name: "n", SQL: "SET transaction_read_only = off; DELETE FROM orders", AtLeast: new(int64(0))}}
		}, "spec.checks[0].sql: Invalid value: \"SET transaction_read_only = off; DELETE FROM orders\": several statements"},
		{"mysql check with an executable comment", func(s *restorev1.RestoreJobSpec) {
			s.Target.Engine, s.Target.Port = cairnv1.MySQLEngine, 3306
			s.Checks = []restorev1.Check{{Name: "n", SQL: "SELECT 1 /*!, 2 */", AtLeast: new(int64(0))}}
		}, "spec.checks[0].sql"},
		{"both sources", func(s *restorev1.RestoreJobSpec) { s.Source.Store = storeSource() }, "spec.source: set exactly one of backupJob or store, not both"},
		{"no source", func(s *restorev1.RestoreJobSpec) { s.Source = restorev1.RestoreSource{} }, "spec.source: set exactly one of backupJob"},
		{"BackupJob name", func(s *restorev1.RestoreJobSpec) { s.Source.BackupJob.Name = "Orders" }, "spec.source.backupJob.name: must be the name of a BackupJob"},
		{"artifact with ..", func(s *restorev1.RestoreJobSpec) { s.Source.BackupJob.Artifact = "a/../../b" }, `spec.source.backupJob.artifact: must be an artifact name or a relative path in the store without ".."`},
		{"absolute artifact", func(s *restorev1.RestoreJobSpec) { s.Source.BackupJob.Artifact = "/etc/passwd" }, "spec.source.backupJob.artifact"},
		{"artifact with a space", func(s *restorev1.RestoreJobSpec) { s.Source.BackupJob.Artifact = "a b" }, "spec.source.backupJob.artifact: must be an artifact name or path without spaces"},
		{"store without artifact", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.Artifact = ""
		}, "spec.source.store.artifact: set the artifact to restore"},
		{"catalog key without namespace", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.BackupJob = "orders-db"
		}, `spec.source.store.backupJob: must be "namespace/name"`},
		{"catalog key with a bad namespace", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.BackupJob = "Shop/orders-db"
		}, "spec.source.store.backupJob: namespace: a lowercase RFC 1123 label"},
		{"empty catalog key", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.BackupJob = ""
		}, "spec.source.store.backupJob: set the catalog key"},
		{"store with no storage", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.Storage = cairnv1.StorageSpec{}
		}, "spec.source.store.storage: set exactly one of pvc"},
		{"S3 endpoint with a path", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.Storage.S3.Endpoint = "https://s3.example.com/backups"
		}, "spec.source.store.storage.s3.endpoint: must be host[:port] or an http(s) URL without a path"},
		{"PVC subPath escaping", func(s *restorev1.RestoreJobSpec) {
			s.Source = restorev1.RestoreSource{Store: storeSource()}
			s.Source.Store.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "../x"}}
		}, "spec.source.store.storage.pvc.subPath"},
		{"no engine", func(s *restorev1.RestoreJobSpec) { s.Target.Engine = "" }, "spec.target.engine: set the database engine"},
		{"unknown engine", func(s *restorev1.RestoreJobSpec) { s.Target.Engine = "oracle" }, "spec.target.engine: Unsupported value"},
		{"host with scheme", func(s *restorev1.RestoreJobSpec) { s.Target.Host = "postgres://db" }, "spec.target.host: must be a host name or address without a scheme"},
		{"host with port", func(s *restorev1.RestoreJobSpec) { s.Target.Host = "db:5432" }, "spec.target.host: set the port in spec.target.port"},
		{"no database", func(s *restorev1.RestoreJobSpec) { s.Target.Database = "" }, "spec.target.database: set the name of the database"},
		{"bad port", func(s *restorev1.RestoreJobSpec) { s.Target.Port = 70000 }, "spec.target.port: must be between 1 and 65535"},
		{"no credentials", func(s *restorev1.RestoreJobSpec) { s.Target.CredentialsSecretRef.Name = "" }, "spec.target.credentialsSecretRef.name: set the name of a Secret"},
		{"retries", func(s *restorev1.RestoreJobSpec) { s.MaxRetries = new(int32(21)) }, "spec.maxRetries: must be between 0 and 20"},
		{"deadline", func(s *restorev1.RestoreJobSpec) { s.ActiveDeadlineSeconds = new(int64(59)) }, "spec.activeDeadlineSeconds: must be between 60"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(&s)
			errs := ValidateSpec(&s, field.NewPath("spec"))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("valid spec rejected: %v", errs)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			path, detail, ok := strings.Cut(tc.want, ": ")
			if !ok {
				path, detail = "", tc.want
			}
			for _, e := range errs {
				if (path == "" || e.Field == path) && strings.Contains(e.Error(), detail) {
					return
				}
			}
			t.Fatalf("errors %q: none for %s containing %q", errs.ToAggregate().Error(), path, detail)
		})
	}
}

func TestValidateName(t *testing.T) {
	if errs := ValidateName(strings.Repeat("a", 55)); len(errs) > 0 {
		t.Errorf("55 characters rejected: %v", errs)
	}
	if errs := ValidateName(strings.Repeat("a", 56)); len(errs) == 0 {
		t.Error("56 characters accepted; the Job name would exceed 63")
	}
}

func TestOverwriteError(t *testing.T) {
	bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-db"},
		Spec: backupv1.BackupJobSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db", Database: "orders"}}}
	rj := &restorev1.RestoreJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "r"}, Spec: validSpec()}
	rj.Spec.Target.Host, rj.Spec.Target.Database = "orders-db", "orders"
	ferr := OverwriteError(rj, bj)
	if ferr == nil || ferr.Field != "spec.target" || !strings.Contains(ferr.Detail, "allowOverwriteSource: true") {
		t.Fatalf("OverwriteError = %v, want a spec.target error naming allowOverwriteSource", ferr)
	}
	rj.Spec.AllowOverwriteSource = true
	if ferr := OverwriteError(rj, bj); ferr != nil {
		t.Fatalf("allowed overwrite refused: %v", ferr)
	}
	rj.Spec.AllowOverwriteSource = false
	rj.Spec.Target.Database = "orders_verify"
	if ferr := OverwriteError(rj, bj); ferr != nil {
		t.Fatalf("another database refused: %v", ferr)
	}
}

func TestSourceBackupJob(t *testing.T) {
	rj := &restorev1.RestoreJob{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"}, Spec: validSpec()}
	if key, ok := SourceBackupJob(rj); !ok || key.String() != "shop/orders-db" {
		t.Errorf("BackupJob source: %v %v", key, ok)
	}
	rj.Spec.Source = restorev1.RestoreSource{Store: storeSource()}
	rj.Spec.Source.Store.BackupJob = "prod/orders-db"
	if key, ok := SourceBackupJob(rj); !ok || key.String() != "prod/orders-db" {
		t.Errorf("store source: %v %v", key, ok)
	}
	rj.Spec.Source.Store.BackupJob = "nonsense"
	if _, ok := SourceBackupJob(rj); ok {
		t.Error("a malformed catalog key names a BackupJob")
	}
}
