package validation

import (
	"strings"
	"testing"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Values a tool could read as an option, a connection string or a path are
// refused with a message that names the field.
func TestHostileValuesRefused(t *testing.T) {
	p := field.NewPath("spec", "target")
	dbCases := map[string]struct {
		mut  func(*cairnv1.DatabaseRef)
		want string
	}{
		"option name":         {func(d *cairnv1.DatabaseRef) { d.Database = "-h evil" }, `spec.target.database: Invalid value: "-h evil": must not start with "-"`},
		"all databases":       {func(d *cairnv1.DatabaseRef) { d.Database = "--all-databases" }, `spec.target.database`},
		"conninfo name":       {func(d *cairnv1.DatabaseRef) { d.Database = "dbname=prod host=evil" }, `must not contain "="`},
		"uri name":            {func(d *cairnv1.DatabaseRef) { d.Database = "postgresql://evil/prod" }, "spec.target.database"},
		"quote name":          {func(d *cairnv1.DatabaseRef) { d.Database = "x' host='y" }, "spec.target.database"},
		"newline name":        {func(d *cairnv1.DatabaseRef) { d.Database = "x\n\\! id" }, "control characters"},
		"space name":          {func(d *cairnv1.DatabaseRef) { d.Database = "shop " }, "spec.target.database"},
		"slash name":          {func(d *cairnv1.DatabaseRef) { d.Database = "a/b" }, "spec.target.database"},
		"postgres 64 bytes":   {func(d *cairnv1.DatabaseRef) { d.Database = strings.Repeat("a", 64) }, "at most 63 characters for postgres"},
		"mysql 65 bytes":      {func(d *cairnv1.DatabaseRef) { d.Engine = cairnv1.MySQLEngine; d.Database = strings.Repeat("a", 65) }, "at most 64 characters for mysql"},
		"option host":         {func(d *cairnv1.DatabaseRef) { d.Host = "-h" }, "spec.target.host"},
		"socket host":         {func(d *cairnv1.DatabaseRef) { d.Host = "/var/run/postgresql" }, "spec.target.host"},
		"host list":           {func(d *cairnv1.DatabaseRef) { d.Host = "a,b" }, "spec.target.host"},
		"host with parameter": {func(d *cairnv1.DatabaseRef) { d.Host = "db port=1" }, "spec.target.host"},
	}
	for name, c := range dbCases {
		db := goodDB()
		c.mut(&db)
		errs := Database(&db, p, "RestoreJob")
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want one error containing %q", name, errs, c.want)
		}
	}
	for _, ok := range []string{"orders", "orders_restored", "Shop", "a.b-c$d", "_x", "9lives", strings.Repeat("a", 63)} {
		db := goodDB()
		db.Database = ok
		if errs := Database(&db, p, "RestoreJob"); len(errs) != 0 {
			t.Errorf("database %q refused: %v", ok, errs)
		}
	}

	sp := field.NewPath("spec", "storage")
	s3 := func(mut func(*cairnv1.S3Storage)) cairnv1.StorageSpec {
		s := &cairnv1.S3Storage{Endpoint: "http://minio:9000", Bucket: "backups", Prefix: "prod/", Region: "us-east-1",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
		mut(s)
		return cairnv1.StorageSpec{S3: s}
	}
	stCases := map[string]struct {
		st   cairnv1.StorageSpec
		want string
	}{
		"prefix dotdot":     {s3(func(s *cairnv1.S3Storage) { s.Prefix = "a/../b" }), "spec.storage.s3.prefix"},
		"prefix dot":        {s3(func(s *cairnv1.S3Storage) { s.Prefix = "./a" }), "spec.storage.s3.prefix"},
		"prefix absolute":   {s3(func(s *cairnv1.S3Storage) { s.Prefix = "/a" }), "spec.storage.s3.prefix"},
		"prefix double":     {s3(func(s *cairnv1.S3Storage) { s.Prefix = "a//b" }), "spec.storage.s3.prefix"},
		"prefix newline":    {s3(func(s *cairnv1.S3Storage) { s.Prefix = "a\nb" }), "spec.storage.s3.prefix"},
		"bucket option":     {s3(func(s *cairnv1.S3Storage) { s.Bucket = "-bucket" }), "spec.storage.s3.bucket"},
		"bucket space":      {s3(func(s *cairnv1.S3Storage) { s.Bucket = "my bucket" }), "spec.storage.s3.bucket"},
		"region":            {s3(func(s *cairnv1.S3Storage) { s.Region = "us east" }), "spec.storage.s3.region"},
		"endpoint userinfo": {s3(func(s *cairnv1.S3Storage) { s.Endpoint = "http://u:p@minio:9000" }), "spec.storage.s3.endpoint"},
		"endpoint query":    {s3(func(s *cairnv1.S3Storage) { s.Endpoint = "http://minio:9000?x=y" }), "spec.storage.s3.endpoint"},
		"endpoint option":   {s3(func(s *cairnv1.S3Storage) { s.Endpoint = "-h" }), "spec.storage.s3.endpoint"},
		"subPath control":   {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: "a\x00b"}}, "spec.storage.pvc.subPath"},
		"subPath backslash": {cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: `a\..\b`}}, "spec.storage.pvc.subPath"},
	}
	for name, c := range stCases {
		errs := Storage(&c.st, sp, "BackupJob")
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: %v, want one error containing %q", name, errs, c.want)
		}
	}
	for _, ok := range []string{"", "prod", "prod/", "cluster-a/backups/", "a.b/c_d"} {
		st := s3(func(s *cairnv1.S3Storage) { s.Prefix = ok })
		if errs := Storage(&st, sp, "BackupJob"); len(errs) != 0 {
			t.Errorf("prefix %q refused: %v", ok, errs)
		}
	}
	for _, ok := range []string{"s3.eu-central-1.amazonaws.com", "https://s3.example:443", "http://[fd00::1]:9000", "10.0.0.1:9000"} {
		st := s3(func(s *cairnv1.S3Storage) { s.Endpoint = ok })
		if errs := Storage(&st, sp, "BackupJob"); len(errs) != 0 {
			t.Errorf("endpoint %q refused: %v", ok, errs)
		}
	}
}

// FuzzDatabase: Database never panics, and whatever it accepts is safe for
// every tool: no leading "-", no "=", no control character, no space or
// quote, within the engine's length limit, a host without separators.
func FuzzDatabase(f *testing.F) {
	f.Add("postgres", "db.shop.svc", "orders", int32(5432), "creds")
	f.Add("mysql", "-h", "--all-databases", int32(0), "x")
	f.Add("postgres", "a,b", "dbname=x host=y", int32(-1), "")
	f.Add("mysql", "/tmp", "x\n\\! id", int32(70000), "Bad_Name")
	f.Fuzz(func(t *testing.T, engine, host, name string, port int32, secret string) {
		db := cairnv1.DatabaseRef{Engine: cairnv1.DatabaseEngine(engine), Host: host, Port: port, Database: name,
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: secret}}
		errs := Database(&db, field.NewPath("spec", "database"), "BackupJob")
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.database.") {
				t.Fatalf("error does not name a field of spec.database: %v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		limit := MaxMySQLDatabaseName
		if engine == "postgres" {
			limit = MaxPostgresDatabaseName
		}
		if name == "" || len(name) > limit || name[0] == '-' || strings.ContainsAny(name, "= '\"\\/,;`") ||
			strings.IndexFunc(name, unicode.IsControl) >= 0 {
			t.Fatalf("accepted database name %q for %s", name, engine)
		}
		if host == "" || host[0] == '-' || strings.ContainsAny(host, " ,/=\\'\"") || strings.IndexFunc(host, unicode.IsControl) >= 0 {
			t.Fatalf("accepted host %q", host)
		}
	})
}

// FuzzStorage: Storage never panics, and an accepted prefix or subPath has
// no "..", absolute path, backslash or control character.
func FuzzStorage(f *testing.F) {
	f.Add("http://minio:9000", "backups", "prod/", "us-east-1", "", false)
	f.Add("-h", "-b", "../..", "x y", "/etc", true)
	f.Add("http://u:p@h/x?y", "a/b", "a//b", "", "a/../b", true)
	f.Fuzz(func(t *testing.T, endpoint, bucket, pfx, region, subPath string, pvc bool) {
		st := cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: endpoint, Bucket: bucket, Prefix: pfx, Region: region,
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}}
		if pvc {
			st = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "p", SubPath: subPath}}
		}
		if errs := Storage(&st, field.NewPath("spec", "storage"), "BackupJob"); len(errs) > 0 {
			return
		}
		bad := func(s string) bool {
			return strings.HasPrefix(s, "/") || strings.Contains("/"+s+"/", "/../") || strings.Contains(s, `\`) ||
				strings.IndexFunc(s, unicode.IsControl) >= 0
		}
		if pvc && bad(subPath) {
			t.Fatalf("accepted subPath %q", subPath)
		}
		if !pvc && (bad(pfx) || strings.Contains(pfx, "//") || strings.ContainsAny(bucket, "/ ") || strings.HasPrefix(bucket, "-") ||
			strings.ContainsAny(endpoint, " @?#")) {
			t.Fatalf("accepted s3 %q %q %q", endpoint, bucket, pfx)
		}
	})
}
