package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func goodDB() cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db.shop.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}}
}

func TestDatabase(t *testing.T) {
	p := field.NewPath("spec", "database")
	if errs := Database(&cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Host: "10.0.0.1", Database: "x", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "c"}}, p, "BackupJob"); len(errs) != 0 {
		t.Fatalf("valid database rejected: %v", errs)
	}
	cases := map[string]struct {
		mut  func(*cairnv1.DatabaseRef)
		want string
	}{
		"no engine":       {func(d *cairnv1.DatabaseRef) { d.Engine = "" }, "spec.database.engine: Required"},
		"bad engine":      {func(d *cairnv1.DatabaseRef) { d.Engine = "oracle" }, "spec.database.engine: Unsupported"},
		"scheme in host":  {func(d *cairnv1.DatabaseRef) { d.Host = "postgres://db" }, "without a scheme"},
		"port in host":    {func(d *cairnv1.DatabaseRef) { d.Host = "db:5432" }, "set the port in spec.database.port"},
		"bad port":        {func(d *cairnv1.DatabaseRef) { d.Port = 70000 }, "between 1 and 65535"},
		"no database":     {func(d *cairnv1.DatabaseRef) { d.Database = "" }, "spec.database.database: Required"},
		"bad secret name": {func(d *cairnv1.DatabaseRef) { d.CredentialsSecretRef.Name = "Bad_Name" }, "a Secret in the RestoreJob's namespace"},
	}
	for name, c := range cases {
		db := goodDB()
		c.mut(&db)
		errs := Database(&db, p, "RestoreJob")
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want one error containing %q", name, errs, c.want)
		}
	}
}

func TestStorage(t *testing.T) {
	p := field.NewPath("spec", "storage")
	s3 := func() *cairnv1.S3Storage {
		return &cairnv1.S3Storage{Endpoint: "http://minio:9000", Bucket: "backups", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
	}
	if errs := Storage(&cairnv1.StorageSpec{S3: s3()}, p, "BackupJob"); len(errs) != 0 {
		t.Fatalf("valid s3 rejected: %v", errs)
	}
	if errs := Storage(&cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.PartSizeMiB = new(int32(160)); return s }()}, p, "BackupJob"); len(errs) != 0 {
		t.Fatalf("the largest part that fits rejected: %v", errs)
	}
	if errs := Storage(&cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "pvc", SubPath: "a/b"}}, p, "BackupJob"); len(errs) != 0 {
		t.Fatalf("valid pvc rejected: %v", errs)
	}
	// Names like the reserved segment, but not it, are fine.
	for _, ok := range []string{"migrations", "_migrations2", "x_migrations/", "prod/migrations_/"} {
		if errs := Storage(&cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Prefix = ok; return s }()}, p, "BackupJob"); len(errs) != 0 {
			t.Errorf("prefix %q rejected: %v", ok, errs)
		}
		if errs := Storage(&cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "pvc", SubPath: ok}}, p, "BackupJob"); len(errs) != 0 {
			t.Errorf("subPath %q rejected: %v", ok, errs)
		}
	}
	cases := map[string]struct {
		st   cairnv1.StorageSpec
		want string
	}{
		"neither":       {cairnv1.StorageSpec{}, "exactly one of pvc"},
		"both":          {cairnv1.StorageSpec{S3: s3(), PVC: &cairnv1.PVCStorage{ClaimName: "p"}}, "not both"},
		"dotdot":        {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "../x"}}, "without \"..\""},
		"abs":           {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "/x"}}, "relative path"},
		"endpoint path": {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Endpoint = "http://m:9000/bucket"; return s }()}, "without a path"},
		"bucket slash":  {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Bucket = "b/p"; return s }()}, "spec.storage.s3.prefix"},
		"short bucket":  {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Bucket = "ab"; return s }()}, "3 to 63"},
		// The agent holds one part in its 256Mi: 512 (the CRD's maximum) does not fit.
		"part size": {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.PartSizeMiB = new(int32(512)); return s }()},
			"spec.storage.s3.partSizeMiB: Invalid value: 512: does not fit the agent's memory limit (256Mi): one part is held in memory beside 96 MiB for the agent and its dump tool; use at most 160"},
		// A MigrationJob's exports live under <root>/_migrations/<ns>/<name>/:
		// no storage location may be inside that key space.
		"migration space prefix": {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Prefix = "_migrations"; return s }()},
			`spec.storage.s3.prefix: Invalid value: "_migrations": must not contain the path segment "_migrations": it is reserved for MigrationJob exports`},
		"migration space prefix slash":  {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Prefix = "prod/_migrations/"; return s }()}, `reserved for MigrationJob exports`},
		"migration space prefix deeper": {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.Prefix = "_migrations/shop/"; return s }()}, `reserved for MigrationJob exports`},
		"migration space subPath": {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "_migrations"}},
			`spec.storage.pvc.subPath: Invalid value: "_migrations": must not contain the path segment "_migrations"`},
		"migration space subPath dotted":       {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "a/./_migrations/"}}, `reserved for MigrationJob exports`},
		"migration space subPath double slash": {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "a//_migrations"}}, `reserved for MigrationJob exports`},
		"part size just over":                  {cairnv1.StorageSpec{S3: func() *cairnv1.S3Storage { s := s3(); s.PartSizeMiB = new(int32(161)); return s }()}, "use at most 160"},
	}
	for name, c := range cases {
		errs := Storage(&c.st, p, "BackupJob")
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want one error containing %q", name, errs, c.want)
		}
	}
}
