package webhook

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// validPostgres is a defaulted, valid BackupJob.
func validPostgres() *backupv1.BackupJob {
	bj := &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "shop"},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{
				Engine: cairnv1.PostgresEngine, Host: "pg.shop.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "pg-backup"},
			},
			Schedule: "0 2 * * *",
			Storage:  cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "shop/orders"}},
		},
	}
	bj.Spec.SetDefaults()
	return bj
}

func validS3() *backupv1.BackupJob {
	bj := validPostgres()
	bj.Spec.Storage = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "https://s3.eu-central-1.amazonaws.com", Bucket: "shop-backups", Prefix: "prod/",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-backup"},
	}}
	return bj
}

func TestValidateAccepts(t *testing.T) {
	cases := map[string]func(*backupv1.BackupJob){
		"postgres on a pvc": func(*backupv1.BackupJob) {},
		"mysql by IP address": func(b *backupv1.BackupJob) {
			b.Spec.Database.Engine, b.Spec.Database.Host = cairnv1.MySQLEngine, "10.0.0.7"
		},
		"IPv6 host":            func(b *backupv1.BackupJob) { b.Spec.Database.Host = "fd00::7" },
		"upper-case host name": func(b *backupv1.BackupJob) { b.Spec.Database.Host = "DB1.Example.COM" },
		"macro schedule":       func(b *backupv1.BackupJob) { b.Spec.Schedule = "@daily" },
		"time zone":            func(b *backupv1.BackupJob) { b.Spec.TimeZone = "America/Argentina/Buenos_Aires" },
		"empty time zone":      func(b *backupv1.BackupJob) { b.Spec.TimeZone = "" },
		"maxRetries 0":         func(b *backupv1.BackupJob) { b.Spec.MaxRetries = new(int32(0)) },
		"s3 with endpoint URL": func(b *backupv1.BackupJob) { *b = *validS3() },
		"s3 host:port":         func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Endpoint = "minio.storage.svc:9000" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			bj := validPostgres()
			mutate(bj)
			if _, err := (&Validator{}).ValidateCreate(context.Background(), bj); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*backupv1.BackupJob)
		field  string // the one field the error names
		want   string // part of its message: what is wrong or the fix
	}{
		{"empty schedule", func(b *backupv1.BackupJob) { b.Spec.Schedule = "" }, "spec.schedule", "schedule is empty"},
		{"CRON_TZ prefix", func(b *backupv1.BackupJob) { b.Spec.Schedule = "CRON_TZ=Asia/Shanghai 0 2 * * *" }, "spec.schedule", "set the time zone in the timeZone field"},
		{"seconds field", func(b *backupv1.BackupJob) { b.Spec.Schedule = "0 0 2 * * *" }, "spec.schedule", "a seconds field is not supported"},
		{"four fields", func(b *backupv1.BackupJob) { b.Spec.Schedule = "0 2 * *" }, "spec.schedule", "has 4 fields, want 5"},
		{"minute out of range", func(b *backupv1.BackupJob) { b.Spec.Schedule = "61 2 * * *" }, "spec.schedule", "not a valid cron schedule"},
		{"unknown time zone", func(b *backupv1.BackupJob) { b.Spec.TimeZone = "Mars/Olympus" }, "spec.timeZone", `unknown time zone "Mars/Olympus"`},
		{"Local time zone", func(b *backupv1.BackupJob) { b.Spec.TimeZone = "Local" }, "spec.timeZone", "not an IANA time zone name"},
		{"retentionDays beside retention", func(b *backupv1.BackupJob) {
			b.Spec.RetentionDays = 7 // the old default, written out: still both
			b.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
		}, "spec.retentionDays", "not both"},
		{"retention negative", func(b *backupv1.BackupJob) { b.Spec.RetentionDays = -1 }, "spec.retentionDays", "omit it for the default, 7"},
		{"retention too long", func(b *backupv1.BackupJob) { b.Spec.RetentionDays = 3651 }, "spec.retentionDays", "must be between 1 and 3650 days"},
		{"maxRetries negative", func(b *backupv1.BackupJob) { b.Spec.MaxRetries = new(int32(-1)) }, "spec.maxRetries", "must be between 0 and 20"},
		{"maxRetries too many", func(b *backupv1.BackupJob) { b.Spec.MaxRetries = new(int32(21)) }, "spec.maxRetries", "must be between 0 and 20"},
		{"deadline too short", func(b *backupv1.BackupJob) { b.Spec.ActiveDeadlineSeconds = new(int64(59)) }, "spec.activeDeadlineSeconds", "must be between 60"},
		{"deadline too long", func(b *backupv1.BackupJob) { b.Spec.ActiveDeadlineSeconds = new(int64(604801)) }, "spec.activeDeadlineSeconds", "604800 (7 days)"},
		{"no engine", func(b *backupv1.BackupJob) { b.Spec.Database.Engine = "" }, "spec.database.engine", "set the database engine: postgres"},
		{"unknown engine", func(b *backupv1.BackupJob) { b.Spec.Database.Engine = "oracle" }, "spec.database.engine", `supported values: "postgres", "mysql"`},
		{"no host", func(b *backupv1.BackupJob) { b.Spec.Database.Host = "" }, "spec.database.host", "set the host name or address"},
		{"host with scheme", func(b *backupv1.BackupJob) { b.Spec.Database.Host = "postgres://pg.shop.svc" }, "spec.database.host", "without a scheme"},
		{"host with port", func(b *backupv1.BackupJob) { b.Spec.Database.Host = "pg.shop.svc:5432" }, "spec.database.host", "set the port in spec.database.port"},
		{"host with space", func(b *backupv1.BackupJob) { b.Spec.Database.Host = "pg shop" }, "spec.database.host", "must be a DNS name or an IP address"},
		{"port out of range", func(b *backupv1.BackupJob) { b.Spec.Database.Port = 65536 }, "spec.database.port", "must be between 1 and 65535"},
		{"no database name", func(b *backupv1.BackupJob) { b.Spec.Database.Database = "" }, "spec.database.database", "set the name of the database"},
		{"no credentials", func(b *backupv1.BackupJob) { b.Spec.Database.CredentialsSecretRef.Name = "" }, "spec.database.credentialsSecretRef.name", "keys username and password"},
		{"credentials not DNS-1123", func(b *backupv1.BackupJob) { b.Spec.Database.CredentialsSecretRef.Name = "PG_Secret" }, "spec.database.credentialsSecretRef.name", "a DNS-1123 subdomain"},
		{"both storage kinds", func(b *backupv1.BackupJob) { b.Spec.Storage.S3 = validS3().Spec.Storage.S3 }, "spec.storage", "set exactly one of pvc or s3, not both"},
		{"no storage", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC = nil }, "spec.storage", "set exactly one of pvc (a PersistentVolumeClaim) or s3"},
		{"no claim name", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC.ClaimName = "" }, "spec.storage.pvc.claimName", "set the name of a PersistentVolumeClaim"},
		{"claim name not DNS-1123", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC.ClaimName = "Backups" }, "spec.storage.pvc.claimName", "a DNS-1123 subdomain"},
		{"subPath escapes", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC.SubPath = "shop/../../etc" }, "spec.storage.pvc.subPath", `a relative path without ".."`},
		{"subPath absolute", func(b *backupv1.BackupJob) { b.Spec.Storage.PVC.SubPath = "/backups" }, "spec.storage.pvc.subPath", `a relative path without ".."`},
		{"no endpoint", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Endpoint = "" }, "spec.storage.s3.endpoint", "set the S3 endpoint"},
		{"ftp endpoint", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Endpoint = "ftp://files.example.com" }, "spec.storage.s3.endpoint", "an http(s) URL without a path"},
		{"endpoint with bucket path", func(b *backupv1.BackupJob) {
			*b = *validS3()
			b.Spec.Storage.S3.Endpoint = "https://s3.example.com/shop-backups"
		}, "spec.storage.s3.endpoint", "put the bucket in bucket"},
		{"no bucket", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Bucket = "" }, "spec.storage.s3.bucket", "set the bucket name"},
		{"bucket with path", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Bucket = "shop/prod" }, "spec.storage.s3.bucket", "spec.storage.s3.prefix"},
		{"bucket too short", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Bucket = "ab" }, "spec.storage.s3.bucket", "3 to 63 characters"},
		{"no s3 credentials", func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.CredentialsSecretRef.Name = "" }, "spec.storage.s3.credentialsSecretRef.name", "keys accessKeyID and secretAccessKey"},
		{"name too long for the CronJob", func(b *backupv1.BackupJob) { b.Name = strings.Repeat("n", 53) }, "metadata.name", "at most 52 characters"},
		{"unknown deletion policy", func(b *backupv1.BackupJob) { b.Spec.DeletionPolicy = "Orphan" }, "spec.deletionPolicy", `supported values: "Retain", "Delete"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := validPostgres()
			tc.mutate(bj)
			_, err := (&Validator{}).ValidateCreate(context.Background(), bj)
			assertInvalid(t, err, tc.field, tc.want)

			// An update to the same spec is refused the same way (the name
			// cannot change on update).
			if !strings.HasPrefix(tc.field, "metadata.") {
				_, err = (&Validator{}).ValidateUpdate(context.Background(), validPostgres(), bj)
				assertInvalid(t, err, tc.field, tc.want)
			}
		})
	}
}

// assertInvalid checks that err is an Invalid API error with exactly one
// cause, on field, whose message contains want.
func assertInvalid(t *testing.T, err error, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %T %v, want an Invalid API error", err, err)
	}
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		t.Fatalf("no status details in %v", err)
	}
	causes := st.Status().Details.Causes
	if len(causes) != 1 {
		t.Fatalf("got %d causes, want 1: %v", len(causes), err)
	}
	if causes[0].Field != field {
		t.Errorf("field: got %q, want %q (%v)", causes[0].Field, field, err)
	}
	if !strings.Contains(err.Error(), field+": ") || !strings.Contains(causes[0].Message, want) {
		t.Errorf("message %q: want the field %q and %q", err.Error(), field, want)
	}
}

func TestValidateUpdate(t *testing.T) {
	invalidLegacy := func() *backupv1.BackupJob {
		bj := validPostgres()
		bj.Spec.Schedule = "0 0 2 * * *" // admitted before the webhook existed
		bj.Spec.TimeZone = ""            // and never defaulted
		return bj
	}
	legacyBoth := func() *backupv1.BackupJob {
		bj := validPostgres()
		bj.Spec.RetentionDays = 7 // the schema's default before retention forms were one or the other
		bj.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
		return bj
	}
	deleting := metav1.Now()
	cases := []struct {
		name        string
		old, new    func() *backupv1.BackupJob
		wantErr     string
		wantWarning string
	}{{
		name:    "valid to invalid is refused",
		old:     validPostgres,
		new:     func() *backupv1.BackupJob { b := validPostgres(); b.Spec.TimeZone = "Mars/Olympus"; return b },
		wantErr: "spec.timeZone",
	}, {
		name: "a metadata-only update of an invalid legacy object is allowed, with a warning",
		old:  invalidLegacy,
		new: func() *backupv1.BackupJob {
			b := invalidLegacy()
			b.Spec.SetDefaults() // as the mutating webhook does
			b.Finalizers = []string{backupv1.CleanupFinalizer}
			return b
		},
		wantWarning: "spec.schedule",
	}, {
		name: "changing an invalid legacy spec must fix it",
		old:  invalidLegacy,
		new: func() *backupv1.BackupJob {
			b := invalidLegacy()
			b.Spec.SetDefaults()
			b.Spec.RetentionDays = 30
			return b
		},
		wantErr: "spec.schedule",
	}, {
		name: "an object stored with both retention forms (the old default) stays updatable while retentionDays is unchanged",
		old:  legacyBoth,
		new:  func() *backupv1.BackupJob { b := legacyBoth(); b.Spec.Schedule = "30 3 * * *"; return b },
	}, {
		name:    "changing the retentionDays of an object with both forms must choose one",
		old:     legacyBoth,
		new:     func() *backupv1.BackupJob { b := legacyBoth(); b.Spec.RetentionDays = 30; return b },
		wantErr: "spec.retentionDays: Forbidden: set either retentionDays",
	}, {
		name: "dropping retentionDays from an object with both forms is allowed",
		old:  legacyBoth,
		new:  func() *backupv1.BackupJob { b := legacyBoth(); b.Spec.RetentionDays = 0; return b },
	}, {
		name: "adding retention beside retentionDays is refused",
		old:  func() *backupv1.BackupJob { b := validPostgres(); b.Spec.RetentionDays = 14; return b },
		new: func() *backupv1.BackupJob {
			b := validPostgres()
			b.Spec.RetentionDays = 14
			b.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7}
			return b
		},
		wantErr: "not both",
	}, {
		name: "an object being deleted is never blocked",
		old:  invalidLegacy,
		new: func() *backupv1.BackupJob {
			b := invalidLegacy()
			b.Spec.Schedule = "nonsense"
			b.DeletionTimestamp = &deleting
			b.Finalizers = nil
			return b
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := (&Validator{}).ValidateUpdate(context.Background(), tc.old(), tc.new())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error: got %v, want one naming %s", err, tc.wantErr)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(w, "\n"), tc.wantWarning) {
				t.Errorf("warnings %q: want one naming %s", w, tc.wantWarning)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	cases := []struct {
		name   string
		old    *backupv1.BackupJob // nil: create
		mutate func(*backupv1.BackupJob)
		want   string // "" means no warning
	}{
		{name: "plain", mutate: func(*backupv1.BackupJob) {}},
		{name: "run-now while suspended", mutate: func(b *backupv1.BackupJob) {
			b.Spec.Suspend = true
			b.Annotations = map[string]string{backupv1.RunNowAnnotation: "r1"}
		}, want: "does not start while the BackupJob is suspended"},
		{name: "run-now already acted on", mutate: func(b *backupv1.BackupJob) {
			b.Spec.Suspend = true
			b.Annotations = map[string]string{backupv1.RunNowAnnotation: "r1"}
			b.Status.LastRunNowRequest = "r1"
		}},
		{name: "insecure s3", mutate: func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Insecure = true }, want: "unencrypted"},
		{name: "http s3 endpoint", mutate: func(b *backupv1.BackupJob) { *b = *validS3(); b.Spec.Storage.S3.Endpoint = "http://minio:9000" }, want: "unencrypted"},
		{name: "deletionPolicy Delete on create", mutate: func(b *backupv1.BackupJob) { b.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete }, want: "deletes all its stored backups"},
		{name: "deletionPolicy switched to Delete", old: validPostgres(), mutate: func(b *backupv1.BackupJob) { b.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete }, want: "deletes all its stored backups"},
		{name: "deletionPolicy already Delete", old: func() *backupv1.BackupJob {
			b := validPostgres()
			b.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
			return b
		}(), mutate: func(b *backupv1.BackupJob) {
			b.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
			b.Spec.RetentionDays = 9
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := validPostgres()
			tc.mutate(bj)
			var w []string
			var err error
			if tc.old == nil {
				w, err = (&Validator{}).ValidateCreate(context.Background(), bj)
			} else {
				w, err = (&Validator{}).ValidateUpdate(context.Background(), tc.old, bj)
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(w) > 0:
				t.Errorf("unexpected warnings %q", w)
			case tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], tc.want)):
				t.Errorf("warnings %q: want one containing %q", w, tc.want)
			}
		})
	}
}
