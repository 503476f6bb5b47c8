package config

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"
)

func envOf(kv map[string]string, files map[string]string) Env {
	return Env{
		Lookup: func(k string) (string, bool) { v, ok := kv[k]; return v, ok },
		ReadFile: func(name string) ([]byte, error) {
			if v, ok := files[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

var base = map[string]string{
	"CAIRN_ENGINE":    "postgres",
	"CAIRN_DB_HOST":   "db.example",
	"CAIRN_DB_NAME":   "app",
	"CAIRN_DB_USER":   "backup",
	"CAIRN_STORE":     "pvc",
	"CAIRN_PVC_PATH":  "/backups",
	"CAIRN_BACKUPJOB": "shop/orders",
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		files   map[string]string
		args    []string
		check   func(t *testing.T, c *Config)
		wantErr string
	}{
		{name: "from environment", env: with(base, "CAIRN_DB_PORT", "6543", "CAIRN_DB_PASSWORD", "pw", "CAIRN_RETENTION_DAYS", "7"),
			check: func(t *testing.T, c *Config) {
				if c.Engine != "postgres" || c.DB.Host != "db.example" || c.DB.Port != 6543 || c.DB.Password != "pw" ||
					c.RetentionDays != 7 || c.BackupJob.String() != "shop/orders" || c.Store != "pvc" || c.PVCPath != "/backups" {
					t.Errorf("%+v", c)
				}
				if c.TerminationLog != DefaultTerminationLog || c.TerminationLogSet {
					t.Errorf("termination log %q set=%v", c.TerminationLog, c.TerminationLogSet)
				}
			}},
		{name: "flags override environment", env: with(base, "CAIRN_DB_PORT", "6543"),
			args: []string{"--db-port=7000", "--engine", "mysql", "--backupjob=a/b", "--termination-log=/tmp/t"},
			check: func(t *testing.T, c *Config) {
				if c.DB.Port != 7000 || c.Engine != "mysql" || c.BackupJob.String() != "a/b" || c.TerminationLog != "/tmp/t" || !c.TerminationLogSet {
					t.Errorf("%+v", c)
				}
			}},
		{name: "password from file, newline trimmed", env: with(base, "CAIRN_DB_PASSWORD_FILE", "/s/pw"), files: map[string]string{"/s/pw": "s3cret\n"},
			check: func(t *testing.T, c *Config) {
				if c.DB.Password != "s3cret" {
					t.Errorf("password %q", c.DB.Password)
				}
			}},
		{name: "password file flag", env: base, files: map[string]string{"/s/pw": "x\r\n"}, args: []string{"--db-password-file=/s/pw"},
			check: func(t *testing.T, c *Config) {
				if c.DB.Password != "x" {
					t.Errorf("password %q", c.DB.Password)
				}
			}},
		{name: "both password and file", env: with(base, "CAIRN_DB_PASSWORD", "a", "CAIRN_DB_PASSWORD_FILE", "/s/pw"), files: map[string]string{"/s/pw": "b"}, wantErr: "set only one"},
		{name: "missing password file", env: with(base, "CAIRN_DB_PASSWORD_FILE", "/nope"), wantErr: "CAIRN_DB_PASSWORD_FILE"},
		{name: "s3 settings and credentials", env: with(base, "CAIRN_STORE", "s3", "CAIRN_S3_ENDPOINT", "minio:9000", "CAIRN_S3_BUCKET", "b",
			"CAIRN_S3_PREFIX", "p/", "CAIRN_S3_INSECURE", "true", "CAIRN_S3_REGION", "eu-west-1", "AWS_ACCESS_KEY_ID", "ak",
			"AWS_SECRET_ACCESS_KEY_FILE", "/s/sk"), files: map[string]string{"/s/sk": "sk"},
			check: func(t *testing.T, c *Config) {
				s := c.S3
				if s.Endpoint != "minio:9000" || s.Bucket != "b" || s.Prefix != "p/" || !s.Insecure || s.Region != "eu-west-1" ||
					s.AccessKey != "ak" || s.SecretKey != "sk" || s.PartSize != 16<<20 {
					t.Errorf("%+v", s)
				}
			}},
		{name: "password as a flag is refused", env: base, args: []string{"--db-password=hunter2"}, wantErr: "never taken from arguments"},
		{name: "password flag without value refused", env: base, args: []string{"-password", "hunter2"}, wantErr: "never taken from arguments"},
		{name: "secret key flag refused", env: base, args: []string{"--aws-secret-access-key=x"}, wantErr: "never taken from arguments"},
		{name: "bad port", env: with(base, "CAIRN_DB_PORT", "five"), wantErr: "CAIRN_DB_PORT"},
		{name: "bad bool", env: with(base, "CAIRN_S3_INSECURE", "maybe"), wantErr: "CAIRN_S3_INSECURE"},
		{name: "bad engine", env: with(base, "CAIRN_ENGINE", "oracle"), wantErr: "engine"},
		{name: "engine optional (restore)", env: with(base, "CAIRN_ENGINE", "")},
		{name: "no store", env: with(base, "CAIRN_STORE", ""), wantErr: "store is not set"},
		{name: "bad store", env: with(base, "CAIRN_STORE", "nfs"), wantErr: "pvc or s3"},
		{name: "no job", env: with(base, "CAIRN_BACKUPJOB", ""), wantErr: "backup job is not set"},
		{name: "bad job", env: with(base, "CAIRN_BACKUPJOB", "orders"), wantErr: "namespace/name"},
		{name: "negative retention", env: with(base, "CAIRN_RETENTION_DAYS", "-1"), wantErr: "negative"},
		{name: "part size too small", env: with(base, "CAIRN_S3_PART_SIZE_MIB", "1"), wantErr: "part size"},
		{name: "unknown flag", env: base, args: []string{"--nope"}, wantErr: "nope"},
		{name: "stray argument", env: base, args: []string{"extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("backup", tt.args, envOf(tt.env, tt.files), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load: %v, want error containing %q", err, tt.wantErr)
				}
				for _, a := range tt.args {
					if _, v, ok := strings.Cut(a, "="); ok && len(v) > 3 && strings.Contains(err.Error(), v) {
						t.Errorf("error %q echoes the argument value %q", err, v)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	_, err := Load("backup", []string{"--help"}, envOf(base, nil), &out)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"-db-host", "CAIRN_DB_HOST", "-db-password-file", "-s3-endpoint"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "-db-password ") {
		t.Errorf("usage offers a password flag")
	}
}

func TestUnsafeValuesRefused(t *testing.T) {
	for _, kv := range [][2]string{
		{"CAIRN_DB_HOST", "-h evil"}, {"CAIRN_DB_HOST", "/var/run/postgresql"}, {"CAIRN_DB_HOST", "a,b"},
		{"CAIRN_DB_NAME", "x\n\\! id"}, {"CAIRN_DB_USER", "u\x01"},
		{"CAIRN_S3_PREFIX", "a/../b"}, {"CAIRN_S3_PREFIX", `a\b`}, {"CAIRN_S3_PREFIX", "./a"},
	} {
		_, err := Load("backup", nil, envOf(with(base, kv[0], kv[1]), nil), io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%s=%q: err = %v, want a usage error", kv[0], kv[1], err)
		}
	}
	// Names that look like options or connection strings are data.
	for _, name := range []string{"-h evil", "dbname=x host=y", "postgresql://h/db", "--all-databases"} {
		if _, err := Load("backup", nil, envOf(with(base, "CAIRN_DB_NAME", name), nil), io.Discard); err != nil {
			t.Errorf("CAIRN_DB_NAME=%q refused: %v", name, err)
		}
	}
}

func TestCheckTimeout(t *testing.T) {
	c, err := Load("restore", nil, envOf(base, nil), io.Discard)
	if err != nil || c.CheckTimeout != 10*time.Minute {
		t.Fatalf("default check timeout: %v, %v; want 10m", c, err)
	}
	if c, err = Load("restore", nil, envOf(with(base, "CAIRN_CHECK_TIMEOUT", "3s"), nil), io.Discard); err != nil || c.CheckTimeout != 3*time.Second {
		t.Fatalf("CAIRN_CHECK_TIMEOUT=3s: %v, %v", c, err)
	}
	for _, v := range []string{"0s", "10ms", "25h", "soon"} {
		_, err := Load("restore", nil, envOf(with(base, "CAIRN_CHECK_TIMEOUT", v), nil), io.Discard)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("CAIRN_CHECK_TIMEOUT=%s: err = %v, want a usage error", v, err)
		}
	}
}

// Releasing a PostgreSQL archiver's slot needs no store (the operator runs
// it without one in its own namespace when the BackupJob's namespace is
// being deleted); every other archive-status still needs one.
func TestArchiveReleaseNeedsNoStore(t *testing.T) {
	noStore := with(base, "CAIRN_STORE", "", "CAIRN_PVC_PATH", "")
	c, err := Load("archive-status", nil, envOf(with(noStore, "CAIRN_ARCHIVE_RELEASE_SLOT", "true"), nil), io.Discard)
	if err != nil {
		t.Fatalf("release without a store: %v", err)
	}
	if !c.ArchiveReleaseSlot || c.Store != "" || c.BackupJob.String() != "shop/orders" {
		t.Errorf("release without a store: %+v", c)
	}
	for name, env := range map[string]map[string]string{
		"a check":         noStore,
		"release, MySQL":  with(noStore, "CAIRN_ARCHIVE_RELEASE_SLOT", "true", "CAIRN_ENGINE", "mysql"),
		"release, no job": with(noStore, "CAIRN_ARCHIVE_RELEASE_SLOT", "true", "CAIRN_BACKUPJOB", ""),
	} {
		if _, err := Load("archive-status", nil, envOf(env, nil), io.Discard); err == nil {
			t.Errorf("%s without a store: accepted", name)
		}
	}
	if _, err := Load("backup", nil, envOf(with(noStore, "CAIRN_ARCHIVE_RELEASE_SLOT", "true"), nil), io.Discard); err == nil || !strings.Contains(err.Error(), "store is not set") {
		t.Errorf("a backup without a store: %v, want refused", err)
	}
}
