package suite

import (
	"strconv"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// Alias is another address of the test server: another name for
// 127.0.0.1, or a second port (a TCP proxy in front of the same server).
type Alias struct {
	Name string
	Host string
	Port int
}

// Aliases returns addresses of e's server other than the 127.0.0.1:port the
// suite uses, each spelt differently: a name, a second port, both.
func (e *Env) Aliases(t *testing.T) []Alias {
	t.Helper()
	p, err := testenv.NewProxy("127.0.0.1:" + strconv.Itoa(e.DB.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return []Alias{
		{"localhost", "localhost", e.DB.Port()},
		{"second-port", "127.0.0.1", p.Port()},
		{"localhost-second-port", "localhost", p.Port()},
	}
}

// env sets prefix HOST and PORT ("CAIRN_DB_" or "CAIRN_TARGET_DB_") to a.
func (a Alias) env(prefix string) []string {
	return []string{prefix + "HOST=" + a.Host, prefix + "PORT=" + strconv.Itoa(a.Port)}
}

// refused checks that a run was refused by the identity guard: exit 2 and
// a reason naming the match.
func refused(t *testing.T, r testenv.Run, what string) {
	t.Helper()
	if r.Code != contract.ExitUsage {
		t.Fatalf("%s: exit %d, want %d (refused: the target is the source)\nstderr: %s", what, r.Code, contract.ExitUsage, lastLines(r.Stderr, 6))
	}
	reason := lastLine(r.Stderr)
	if !strings.Contains(reason, "is the source") || !strings.Contains(reason, "the same server") && !strings.Contains(reason, "source's session") {
		t.Fatalf("%s: reason %q does not say that the target is the source and what matched", what, reason)
	}
}

// MigrateIntoSourceRefused: a migration whose target is its own source
// under another address (a name, a second port) is refused by every step
// that writes — precheck, copy, import, replication-start (PostgreSQL),
// cutover — with allowNonEmptyTarget set, and the source keeps every row.
// The same steps into another database of the same server are not refused.
func MigrateIntoSourceRefused(t *testing.T, e *Env) {
	m := newMigration(t, e, "mig_self")
	st := e.NewStore(t, "pvc")
	m.env = append(m.env, st.Env...)
	before := fingerprint(t, e.DB, m.src)
	steps := []string{"precheck", "copy"}
	if e.DB.Engine() == "postgres" {
		steps = append(steps, "replication-start")
	}
	ex := m.ok(t, "export")
	for _, a := range e.Aliases(t) {
		t.Run(a.Name, func(t *testing.T) {
			self := append(a.env("CAIRN_TARGET_DB_"), "CAIRN_TARGET_DB_NAME="+m.src, "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET=true")
			for _, step := range steps {
				refused(t, m.run(t, step, self...), step)
			}
			refused(t, m.run(t, "import", append(self, "CAIRN_DB_HOST=", "CAIRN_DB_USER=", "CAIRN_ARTIFACT="+ex.Artifact)...), "import")
			refused(t, m.run(t, "cutover", append(self, "CAIRN_CUTOVER_SOURCE_READ_ONLY=true")...), "cutover")
			if got := fingerprint(t, e.DB, m.src); got != before {
				t.Fatalf("the source changed:\n%s\nbefore:\n%s", got, before)
			}
			// Not a false alarm: another database behind the same address.
			other := append(a.env("CAIRN_TARGET_DB_"), "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET=true")
			m.ok(t, "precheck", other...)
			m.ok(t, "copy", other...)
			if got := fingerprint(t, e.DB, m.dst); got != before {
				t.Fatalf("copy into %s via %s:%d: target differs from the source:\n%s\nsource:\n%s", m.dst, a.Host, a.Port, got, before)
			}
		})
	}
	// The source's own address is refused too (the string check's case).
	refused(t, m.run(t, "copy", "CAIRN_TARGET_DB_NAME="+m.src, "CAIRN_MIGRATE_ALLOW_NON_EMPTY_TARGET=true"), "copy into the same address")
	if got := fingerprint(t, e.DB, m.src); got != before {
		t.Fatalf("the source changed:\n%s\nbefore:\n%s", got, before)
	}
}

// RestoreOverSourceRefused: a restore (and a verification restore, with
// checks and drop-after-checks) into the database the backup was taken of,
// under any address, is refused before anything is written; the newer
// data stays. allowOverwriteSource restores it on purpose; another
// database of the same server is restored as usual.
func RestoreOverSourceRefused(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "id_restore_" + kind
	job := naming.Job{Namespace: "shop", Name: "idr-" + kind}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_scratch") })
	backedUp := fingerprint(t, e.DB, db)
	res := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	name := key[strings.LastIndex(key, "/")+1:]
	entry, err := catalog.DecodeManifest(st.Read(t, job.ManifestKey(name)), job, job.ManifestKey(name))
	check(t, err)
	if entry.Source == nil || entry.Source.Server == "" || entry.Source.Database != db {
		t.Fatalf("the manifest does not record the source's identity: %+v", entry.Source)
	}
	check(t, e.DB.Mutate(db))
	newer := fingerprint(t, e.DB, db)
	if newer == backedUp {
		t.Fatal("Mutate changed nothing")
	}
	verification := checksEnv(t, []contract.Check{{Name: "rows", SQL: "select count(*) from customers", AtLeast: ptr(int64(1))}}, true)
	addrs := append(e.Aliases(t), Alias{"same-address", "127.0.0.1", e.DB.Port()})
	for _, a := range addrs {
		t.Run(a.Name, func(t *testing.T) {
			refused(t, e.agent(t, st, db, job, a.env("CAIRN_DB_"), "restore"), "restore")
			refused(t, e.agent(t, st, db, job, append(a.env("CAIRN_DB_"), verification...), "restore"), "verification restore")
			if !dbExists(t, e, db) {
				t.Fatal("the source database was dropped")
			}
			if got := fingerprint(t, e.DB, db); got != newer {
				t.Fatalf("the source changed:\n%s\nbefore:\n%s", got, newer)
			}
			// Another database on the same server: restored.
			r := mustSucceed(t, e.agent(t, st, db+"_scratch", job, append(a.env("CAIRN_DB_"), verification...), "restore"))
			if !r.TargetDropped || len(r.Checks) != 1 || !r.Checks[0].Passed {
				t.Fatalf("verification restore into a scratch database: %+v", r)
			}
		})
	}
	mustSucceed(t, e.agent(t, st, db, job, []string{contract.EnvAllowOverwriteSource + "=true"}, "restore"))
	if got := fingerprint(t, e.DB, db); got != backedUp {
		t.Fatalf("allowOverwriteSource: the restored database differs from the backup:\n%s\nbackup:\n%s", got, backedUp)
	}
}
