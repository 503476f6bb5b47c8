package config

import (
	"errors"
	"io"
	"strings"
	"testing"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/naming"
)

// FuzzLoad feeds arbitrary environment values and arguments to Load: it
// never panics, fails only with an error, and what it accepts is safe to
// use (a known store, coordinates CheckConn accepts, a valid BackupJob key,
// a part size in range).
func FuzzLoad(f *testing.F) {
	f.Add("backup", "db.example", "app", "backup", "5432", "shop/orders", "pvc", "prod/", "16", "7", "")
	f.Add("restore", "-h evil", "dbname=x host=y", "--help", "0x10", "a/b/c", "s3", "../..", "1", "-1", "--db-name=-x")
	f.Add("list", "10.0.0.1", "x\n\\! id", "u\x00", "", "SHOP/Orders", "pvc", "", "513", "", "--password=x")
	f.Add("prune", "/tmp", "", "", "99999999999999999999", "ns/", "", "", "", "1", "--\x00--artifact")
	f.Fuzz(func(t *testing.T, cmd, host, db, user, port, job, st, prefix, part, days, args string) {
		env := map[string]string{
			"CAIRN_ENGINE": "postgres", "CAIRN_DB_HOST": host, "CAIRN_DB_NAME": db, "CAIRN_DB_USER": user,
			"CAIRN_DB_PORT": port, "CAIRN_BACKUPJOB": job, "CAIRN_STORE": st, "CAIRN_PVC_PATH": "/backups",
			"CAIRN_S3_ENDPOINT": "s3.example", "CAIRN_S3_BUCKET": "b", "CAIRN_S3_PREFIX": prefix,
			"CAIRN_S3_PART_SIZE_MIB": part, "CAIRN_RETENTION_DAYS": days,
			"AWS_ACCESS_KEY_ID": "ak", "AWS_SECRET_ACCESS_KEY": "sk",
		}
		c, err := Load(cmd, strings.Split(args, "\x00"), envOf(env, nil), io.Discard)
		if err != nil {
			if c != nil {
				t.Fatalf("Load returned a config with error %v", err)
			}
			return
		}
		if c.Store != "pvc" && c.Store != "s3" {
			t.Fatalf("accepted store %q", c.Store)
		}
		if err := engine.CheckConn(c.DB); err != nil {
			t.Fatalf("accepted unsafe coordinates: %v", err)
		}
		if _, err := naming.ParseJob(c.BackupJob.String()); err != nil {
			t.Fatalf("accepted backup job %q: %v", c.BackupJob, err)
		}
		if c.S3.PartSize < 5<<20 || c.S3.PartSize > 512<<20 {
			t.Fatalf("accepted part size %d", c.S3.PartSize)
		}
		if c.RetentionDays < 0 {
			t.Fatalf("accepted retention days %d", c.RetentionDays)
		}
		if checkPrefix(c.S3.Prefix) != nil || strings.Contains("/"+c.S3.Prefix+"/", "/../") {
			t.Fatalf("accepted prefix %q", c.S3.Prefix)
		}
		if c.Engine != "postgres" {
			t.Fatalf("engine changed to %q", c.Engine)
		}
		if errors.Is(err, ErrHelp) {
			t.Fatal("help with a config")
		}
	})
}
