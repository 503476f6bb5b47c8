package pitr_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/store"
)

// Issue 47, item 2: the replay's tools (mariadb-binlog, the mariadb client)
// get a minimal environment: none of the agent's store or encryption
// secrets, the target's password only to the client. Each tool is run
// through a wrapper that records its environment, then runs the real one.
func TestReplayToolsGetNoSecrets(t *testing.T) {
	const storeSecret, identity = "s3-SECRET-toolenv-41f2", "AGE-SECRET-KEY-TOOLENV-9C0D"
	t.Setenv("AWS_SECRET_ACCESS_KEY", storeSecret)
	t.Setenv("CAIRN_ENCRYPTION_IDENTITY", identity)
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const dir = "pitr/toolenv"
	sql(t, "", "DROP DATABASE IF EXISTS toolenv; DROP DATABASE IF EXISTS toolenv_copy; CREATE DATABASE toolenv")
	sql(t, "toolenv", "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1)")
	a := startArchiver(t, st, dir)
	defer a.stop()
	baseFile := dump(t, "toolenv")
	f, err := os.Open(baseFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := pitr.ReadBase(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	sql(t, "toolenv", "INSERT INTO t VALUES (2)")
	archivedPast(t, st, dir, time.Now().Truncate(time.Second).Add(time.Second))
	restoreBase(t, baseFile, "toolenv_copy")

	wrappers := t.TempDir()
	wrap := func(tool string) string {
		w := filepath.Join(wrappers, tool)
		script := "#!/bin/sh\nenv >> " + w + ".env\nexec " + tool + " \"$@\"\n"
		if err := os.WriteFile(w, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return w
	}
	if _, err := pitr.Replay(t.Context(), st, dir, base, time.Time{},
		pitr.Target{Host: "127.0.0.1", Port: db.Port, User: db.User, Password: db.Password},
		"toolenv", "toolenv_copy", wrap("mariadb-binlog"), wrap("mariadb"), nil); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if got := sql(t, "toolenv_copy", "SELECT GROUP_CONCAT(id ORDER BY id) FROM t"); got != "1,2" {
		t.Errorf("replayed rows %q, want 1,2", got)
	}
	for _, tool := range []string{"mariadb-binlog", "mariadb"} {
		env, err := os.ReadFile(filepath.Join(wrappers, tool+".env"))
		if err != nil {
			t.Fatalf("%s ran without its wrapper: %v", tool, err)
		}
		for _, secret := range []string{storeSecret, identity, "AWS_SECRET_ACCESS_KEY", "CAIRN_"} {
			if strings.Contains(string(env), secret) {
				t.Errorf("%s's environment holds %q", tool, secret)
			}
		}
		if hasPwd := strings.Contains(string(env), "MYSQL_PWD="+db.Password); hasPwd != (tool == "mariadb") {
			t.Errorf("%s's environment: the target's password there: %v", tool, hasPwd)
		}
	}
}
