package config

import (
	"io"
	"strings"
	"testing"
)

var migrateBase = map[string]string{
	"CAIRN_ENGINE":             "postgres",
	"CAIRN_DB_HOST":            "src.example",
	"CAIRN_DB_NAME":            "shop",
	"CAIRN_DB_USER":            "u",
	"CAIRN_DB_PASSWORD":        "source-secret",
	"CAIRN_TARGET_DB_HOST":     "dst.example",
	"CAIRN_TARGET_DB_NAME":     "shop2",
	"CAIRN_TARGET_DB_USER":     "v",
	"CAIRN_TARGET_DB_PASSWORD": "target-secret",
	"CAIRN_MIGRATION":          "shop/move",
}

func TestLoadMigrate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		files   map[string]string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "defaults", args: []string{"copy"}, env: migrateBase, check: func(t *testing.T, c *Config) {
			m := c.Migrate
			if m.Step != "copy" || m.Mode != "Full" || m.Verify != "Checksum" || m.Parallel != 4 || m.AllowNonEmptyTarget ||
				m.Target.Host != "dst.example" || m.Target.Password != "target-secret" || c.BackupJob.String() != "shop/move" || !m.Filter.Empty() {
				t.Errorf("%+v / %+v", c, m)
			}
			if !strings.Contains(strings.Join(c.Secrets(), " "), "target-secret") {
				t.Error("the target password is not among the secrets to redact")
			}
		}},
		{name: "settings", args: []string{"verify", "--parallel=8"}, env: with(migrateBase, "CAIRN_MIGRATE_MODE", "SchemaOnly",
			"CAIRN_MIGRATE_INCLUDE", "public, sales.o*", "CAIRN_MIGRATE_EXCLUDE", "*.tmp_*", "CAIRN_MIGRATE_VERIFY", "RowCount",
			"CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET", "true", "CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES", "1048576", "CAIRN_STORE", "s3",
			"CAIRN_S3_ENDPOINT", "s3:9000", "CAIRN_S3_BUCKET", "b"),
			check: func(t *testing.T, c *Config) {
				m := c.Migrate
				if m.Mode != "SchemaOnly" || m.Verify != "RowCount" || m.Parallel != 8 || !m.AllowNonEmptyTarget || m.MaxRetainedWALBytes != 1<<20 ||
					!m.Filter.Match("sales", "orders") || m.Filter.Match("public", "tmp_1") || m.Filter.Match("other", "x") || c.Store != "s3" {
					t.Errorf("%+v", m)
				}
			}},
		{name: "target password file", args: []string{"copy"}, env: with(migrateBase, "CAIRN_TARGET_DB_PASSWORD", "", "CAIRN_TARGET_DB_PASSWORD_FILE", "/run/pw"),
			files: map[string]string{"/run/pw": "from-file\n"},
			check: func(t *testing.T, c *Config) {
				if c.Migrate.Target.Password != "from-file" {
					t.Errorf("password %q", c.Migrate.Target.Password)
				}
			}},
		{name: "no step", args: nil, env: migrateBase, wantErr: "needs a step"},
		{name: "unknown step", args: []string{"teleport"}, env: migrateBase, wantErr: "unknown migrate step"},
		{name: "bad mode", args: []string{"copy"}, env: with(migrateBase, "CAIRN_MIGRATE_MODE", "Fast"), wantErr: "mode"},
		{name: "bad verify", args: []string{"copy"}, env: with(migrateBase, "CAIRN_MIGRATE_VERIFY", "md5"), wantErr: "verify"},
		{name: "bad pattern", args: []string{"copy"}, env: with(migrateBase, "CAIRN_MIGRATE_INCLUDE", "a,,b"), wantErr: "empty pattern"},
		{name: "bad parallel", args: []string{"copy", "--parallel=0"}, env: migrateBase, wantErr: "parallel"},
		{name: "bad wal", args: []string{"copy"}, env: with(migrateBase, "CAIRN_REPLICATION_MAX_RETAINED_WAL_BYTES", "-1"), wantErr: "non-negative"},
		{name: "bad migration", args: []string{"copy"}, env: with(migrateBase, "CAIRN_MIGRATION", "x"), wantErr: "migration"},
		{name: "bad target host", args: []string{"copy"}, env: with(migrateBase, "CAIRN_TARGET_DB_HOST", "-h evil"), wantErr: "target database host"},
		{name: "no engine", args: []string{"copy"}, env: with(migrateBase, "CAIRN_ENGINE", ""), wantErr: "engine is not set"},
		{name: "continuous mysql", args: []string{"copy"}, env: with(migrateBase, "CAIRN_ENGINE", "mysql", "CAIRN_MIGRATE_MODE", "Continuous"), wantErr: "PostgreSQL only"},
		{name: "target password as argument", args: []string{"copy", "--password=x"}, env: migrateBase, wantErr: "credentials are never taken from arguments"},
		{name: "both target passwords", args: []string{"copy"}, env: with(migrateBase, "CAIRN_TARGET_DB_PASSWORD_FILE", "/run/pw"), files: map[string]string{"/run/pw": "x"}, wantErr: "set only one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load("migrate", tc.args, envOf(tc.env, tc.files), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if _, ok := err.(*UsageError); !ok {
					t.Errorf("err %T is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}
