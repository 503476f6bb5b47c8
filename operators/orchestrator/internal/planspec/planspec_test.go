package planspec

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

func TestSameDatabase(t *testing.T) {
	db := func(engine cairnv1.DatabaseEngine, host string, port int32, name string) cairnv1.DatabaseRef {
		return cairnv1.DatabaseRef{Engine: engine, Host: host, Port: port, Database: name}
	}
	pg := cairnv1.PostgresEngine
	for _, tc := range []struct {
		name string
		a, b cairnv1.DatabaseRef
		same bool
	}{
		{"identical", db(pg, "db.svc", 5432, "orders"), db(pg, "db.svc", 5432, "orders"), true},
		{"default port", db(pg, "db.svc", 0, "orders"), db(pg, "db.svc", 5432, "orders"), true},
		{"host case and trailing dot", db(pg, "DB.svc.", 0, "orders"), db(pg, "db.svc", 0, "orders"), true},
		{"other database", db(pg, "db.svc", 0, "orders"), db(pg, "db.svc", 0, "orders_verify"), false},
		{"database name case matters", db(pg, "db.svc", 0, "orders"), db(pg, "db.svc", 0, "Orders"), false},
		{"other port", db(pg, "db.svc", 5432, "orders"), db(pg, "db.svc", 5433, "orders"), false},
		{"other server", db(pg, "db.svc", 0, "orders"), db(pg, "scratch.svc", 0, "orders"), false},
		{"mysql default port", db(cairnv1.MySQLEngine, "db", 0, "o"), db(cairnv1.MySQLEngine, "db", 3306, "o"), true},
		{"service and its namespace", db(pg, "orders-db", 0, "orders"), db(pg, "orders-db.shop", 0, "orders"), true},
		{"service and its full name", db(pg, "orders-db", 0, "orders"), db(pg, "Orders-DB.shop.svc.cluster.local.", 5432, "orders"), true},
		{"service of another namespace", db(pg, "orders-db", 0, "orders"), db(pg, "orders-db.staging.svc", 0, "orders"), false},
		{"loopback spellings", db(pg, "localhost", 0, "orders"), db(pg, "127.0.0.1", 0, "orders"), true},
		{"ipv6 loopback", db(pg, "::1", 0, "orders"), db(pg, "localhost", 0, "orders"), true},
	} {
		if got := SameDatabase(tc.a, tc.b, "shop"); got != tc.same {
			t.Errorf("%s: SameDatabase = %v, want %v", tc.name, got, tc.same)
		}
	}
}

func validSpec() platformv1.ProtectionPlanSpec {
	n := int32(3)
	s := platformv1.ProtectionPlanSpec{
		Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db.svc", Database: "orders",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}},
		Backup: platformv1.BackupTemplate{Schedule: "0 2 * * *",
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}},
		Verification: platformv1.VerificationSpec{EveryNBackups: &n, RestoreInto: platformv1.ScratchDatabase{
			Host: "db.svc", Database: "orders_verify", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}}},
		Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
	}
	SetDefaults(&s)
	return s
}

func TestValidateSpec(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*platformv1.ProtectionPlanSpec)
		want   string // "" means valid
	}{
		{"valid", func(*platformv1.ProtectionPlanSpec) {}, ""},
		{"scratch is protected", func(s *platformv1.ProtectionPlanSpec) { s.Verification.RestoreInto.Database = "orders" }, "spec.verification.restoreInto: Forbidden"},
		{"scratch is protected, spelt with the namespace", func(s *platformv1.ProtectionPlanSpec) {
			s.Database.Host = "orders-db"
			s.Verification.RestoreInto.Host, s.Verification.RestoreInto.Database = "orders-db.shop.svc.cluster.local", "orders"
		}, "spec.verification.restoreInto: Forbidden"},
		{"scratch is protected, loopback spellings", func(s *platformv1.ProtectionPlanSpec) {
			s.Database.Host = "localhost"
			s.Verification.RestoreInto.Host, s.Verification.RestoreInto.Database = "127.0.0.1", "orders"
		}, "spec.verification.restoreInto: Forbidden"},
		{"bad cron", func(s *platformv1.ProtectionPlanSpec) { s.Backup.Schedule = "0 25 * * *" }, "spec.backup.schedule"},
		{"bad verification cron", func(s *platformv1.ProtectionPlanSpec) {
			s.Verification.EveryNBackups = nil
			s.Verification.Schedule = new("every sunday")
		}, "spec.verification.schedule"},
		{"neither mode", func(s *platformv1.ProtectionPlanSpec) { s.Verification.EveryNBackups = nil }, "spec.verification: Required"},
		{"unknown zone", func(s *platformv1.ProtectionPlanSpec) { s.TimeZone = "Europe/Atlantis" }, "spec.timeZone"},
		{"short rpo", func(s *platformv1.ProtectionPlanSpec) { s.Objectives.RPO.Duration = time.Second }, "spec.objectives.rpo"},
		{"duplicate checks", func(s *platformv1.ProtectionPlanSpec) {
			one := int64(1)
			s.Verification.Checks = []restorev1.Check{{Name: "a", SQL: "select 1", AtLeast: &one}, {Name: "a", RowCountsMatchBackup: true}}
		}, "Duplicate value"},
		{"check running a shell", func(s *platformv1.ProtectionPlanSpec) {
			s.Verification.Checks = []restorev1.Check{{Name: "a", SQL: "select 1", AtLeast: new(int64(1))}, {Name: "b", SQL: "\\! id", AtLeast: new(int64(1))}}
		}, "spec.verification.checks[1].sql: Invalid value: \"\\\\! id\": a backslash outside a string"},
		{"check with two statements", func(s *platformv1.ProtectionPlanSpec) {
			s.Verification.Checks = []restorev1.Check{{Name: "a", SQL: "select 1; delete from orders", AtLeast: new(int64(1))}}
		}, "spec.verification.checks[0].sql"},
		{"check that is not a query", func(s *platformv1.ProtectionPlanSpec) {
			s.Verification.Checks = []restorev1.Check{{Name: "a", SQL: "COPY (SELECT 1) TO PROGRAM 'id'", AtLeast: new(int64(1))}}
		}, "spec.verification.checks[0].sql: Invalid value: \"COPY (SELECT 1) TO PROGRAM 'id'\": starts with COPY"},
		{"both storages", func(s *platformv1.ProtectionPlanSpec) {
			s.Backup.Storage.S3 = &cairnv1.S3Storage{Endpoint: "s3.example.com", Bucket: "b", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
		}, "spec.backup.storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(&s)
			errs := ValidateSpec(&s, field.NewPath("spec"))
			err := append(errs, ValidateDatabases(&s, "shop", field.NewPath("spec"))...).ToAggregate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSetDefaultsKeepsWhatIsSet(t *testing.T) {
	s := validSpec()
	if s.TimeZone != "UTC" || s.Database.Port != 5432 || s.Verification.RestoreInto.Port != 5432 ||
		*s.Verification.TimeoutSeconds != 3600 || s.Backup.RetentionDays != 0 || s.DeletionPolicy != "Retain" {
		t.Fatalf("defaults not applied: %+v", s)
	}
	s.TimeZone, s.Backup.RetentionDays = "Asia/Shanghai", 30
	SetDefaults(&s)
	if s.TimeZone != "Asia/Shanghai" || s.Backup.RetentionDays != 30 {
		t.Fatalf("a set field was changed: %+v", s)
	}
}

func TestMigrationSourceError(t *testing.T) {
	db := cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "app"}}
	p := field.NewPath("spec", "migration", "template", "source")
	spec := &platformv1.ProtectionPlanSpec{Database: db}
	if err := MigrationSourceError(spec, "shop", p); err != nil {
		t.Fatalf("no migration: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*cairnv1.DatabaseRef)
		ok   bool
	}{
		{"same database, other credentials, explicit default port", func(d *cairnv1.DatabaseRef) {
			d.CredentialsSecretRef.Name = "replicator"
			d.Port = 5432
			d.Host = "DB.svc"
		}, true},
		{"other database", func(d *cairnv1.DatabaseRef) { d.Database = "customers" }, false},
		{"other server", func(d *cairnv1.DatabaseRef) { d.Host = "other.svc" }, false},
		{"other port", func(d *cairnv1.DatabaseRef) { d.Port = 5433 }, false},
		{"other engine", func(d *cairnv1.DatabaseRef) { d.Engine = cairnv1.MySQLEngine; d.Port = 5432 }, false},
	} {
		src := db
		tc.edit(&src)
		spec.Migration = &platformv1.MigrationSpec{Template: migrationv1.MigrationJobSpec{Source: src}}
		err := MigrationSourceError(spec, "shop", p)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "spec.migration.template.source") {
			t.Errorf("%s: error does not name the field: %v", tc.name, err)
		}
	}
}

// The longest time between two backups is what an rpo without
// point-in-time recovery must cover; with pointInTime it is not asked.
func TestRPOFeasible(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		schedule string
		rpo      time.Duration
		pitr     bool
		refused  bool
	}{
		{"0 2 * * *", 26 * time.Hour, false, false},
		{"0 2 * * *", 10 * time.Minute, false, true},
		{"0 2 * * *", 10 * time.Minute, true, false},
		{"*/5 * * * *", 5 * time.Minute, false, false},
		{"*/5 * * * *", 4 * time.Minute, false, true},
		{"0 2 * * 1-5", 26 * time.Hour, false, true}, // the weekend: 72 h
		{"0 2 * * 1-5", 72 * time.Hour, false, false},
	} {
		s := validSpec()
		s.Backup.Schedule, s.Objectives.RPO = tc.schedule, metav1.Duration{Duration: tc.rpo}
		if tc.pitr {
			s.Backup.PointInTime = &backupv1.PointInTimeSpec{}
		}
		err := RPOFeasible(&s, nil, now, field.NewPath("spec"))
		if (err != nil) != tc.refused {
			t.Errorf("%q rpo %s pitr %v: %v, want refused %v", tc.schedule, tc.rpo, tc.pitr, err, tc.refused)
		}
		// An update that changes none of it is not judged again.
		if err := RPOFeasible(&s, s.DeepCopy(), now, field.NewPath("spec")); err != nil {
			t.Errorf("%q rpo %s: unchanged update refused: %v", tc.schedule, tc.rpo, err)
		}
	}
	s := validSpec()
	s.Backup.PointInTime = &backupv1.PointInTimeSpec{}
	s.Verification.Checks = []restorev1.Check{{Name: "rows", RowCountsMatchBackup: true}, {Name: "q", SQL: "select 1", Equals: new("1")}}
	if w := PointInTimeWarnings(&s); len(w) != 1 || !strings.Contains(w[0], "checks[0] (rows): rowCountsMatchBackup is not run") {
		t.Errorf("warnings %q", w)
	}
}
