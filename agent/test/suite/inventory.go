package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// BackupInventory: a backup's manifest lists the tables with the rows the
// database has.
func BackupInventory(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "inv_backup"
	job := naming.Job{Namespace: "shop", Name: "inv"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	// Values that could fool a count read from the dump stream:
	// parentheses and row separators in strings, doubled quotes, a
	// trailing backslash (MySQL: one escaped backslash), a raw newline.
	_, err := e.DB.SQL(db, `CREATE TABLE tricky (id int PRIMARY KEY, s varchar(100), b varchar(20));
INSERT INTO tricky VALUES (1, 'a),(b', 'x'), (2, 'it''s (', NULL), (3, 'back\\', ')'), (4, 'two
lines ),( here', ''), (5, '''', '(');`)
	check(t, err)
	tables := seedTables(e) + 1
	// The default (RowCount: what a RestoreJob's checks compare), then
	// CAIRN_INVENTORY=Checksum (row counts and content checksums).
	for _, c := range []struct {
		env    []string
		method string
		sumLen int
	}{{nil, "RowCount", 0}, {[]string{"CAIRN_INVENTORY=Checksum"}, "Checksum", 16}} {
		run := e.agent(t, st, db, job, c.env, "backup")
		res := mustSucceed(t, run)
		// Row counts come from the dump stream itself (PostgreSQL's
		// archive, mysqldump's INSERTs); the agent logs when it has to
		// count with count(*) instead.
		if strings.Contains(run.Stderr, "count(*)") {
			t.Errorf("backup (%s) fell back to count(*): %s", c.method, run.Stderr)
		}
		key := st.KeyOf(t, job, res.Artifact)
		name := key[strings.LastIndex(key, "/")+1:]
		raw := st.Read(t, job.ManifestKey(name))
		entry, err := catalog.DecodeManifest(raw, job, job.ManifestKey(name))
		check(t, err)
		if entry.Inventory == nil || len(entry.Inventory.Tables) != tables || string(entry.Inventory.Method) != c.method {
			t.Fatalf("manifest (%s): %s", c.method, raw)
		}
		for _, tb := range entry.Inventory.Tables {
			want, err := e.DB.SQL(db, "SELECT COUNT(*) FROM "+tb.Name)
			check(t, err)
			if itoa(int(tb.Rows)) != strings.TrimSpace(want) || len(tb.Checksum) != c.sumLen {
				t.Errorf("inventory (%s) %+v, database has %s rows", c.method, tb, want)
			}
		}
	}
	// CAIRN_INVENTORY=None: no inventory; old manifests without one parse.
	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_INVENTORY=None"}, "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	name := key[strings.LastIndex(key, "/")+1:]
	raw := st.Read(t, job.ManifestKey(name))
	var probe map[string]any
	check(t, json.Unmarshal(raw, &probe))
	if _, ok := probe["inventory"]; ok {
		t.Errorf("CAIRN_INVENTORY=None manifest has an inventory: %s", raw)
	}
	_ = os.Getenv
}

// BackupLockBrief (MySQL): the global read lock that lines the inventory's
// snapshot up with mysqldump's is released once mysqldump started, not
// held for the dump: a write succeeds while a stalled backup is mid-dump,
// and the inventory is still Consistent.
func BackupLockBrief(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	db := "lock_brief"
	job := naming.Job{Namespace: "shop", Name: "lock"}
	check(t, e.DB.Seed(db))
	check(t, e.DB.SeedBig(db, 16))
	t.Cleanup(func() { e.DB.Drop(db) })
	proxy, err := testenv.NewStallProxy("127.0.0.1:"+itoa(e.DB.Port()), 8<<20)
	check(t, err)
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := append(append(append([]string{}, e.DB.AgentEnv(db)...), st.Env...), "CAIRN_BACKUPJOB="+job.String(), "CAIRN_DB_PORT="+itoa(proxy.Port()))
	cmd, _, err := e.Agent.Command(ctx, env, "backup")
	check(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-proxy.Stalled():
	case err := <-exited:
		t.Fatalf("backup ended before the proxy stalled it (%v): %s", err, stderr.String())
	}
	// The server is reached directly here, not through the proxy.
	done := make(chan error, 1)
	go func() {
		_, err := e.DB.SQL(db, "SET SESSION lock_wait_timeout = 5; INSERT INTO orders (customer_id, total) VALUES (1, 2)")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("a write during the backup's dump: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("a write during the backup's dump did not finish in 30 s")
	}
	check(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	proxy.Close()
	t.Logf("agent log:\n%s", lastLines(stderr.String(), 8))
}
