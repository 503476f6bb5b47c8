package suite

import (
	"fmt"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
)

// HostileNames are database names that a tool would read as an option or a
// connection string if the agent passed them carelessly: each must reach
// the real pg_dump / mysqldump / pg_restore / mysql as a database name and
// nothing else. victim is a seeded database a careless agent would be
// redirected to.
func HostileNames(engine string, victim string, port int) []string {
	names := []string{
		"-h evil",
		"--all-databases",
		"dbname=" + victim,
		"dbname=" + victim + " host=203.0.113.1",
		"x' host='203.0.113.1",
		`back\slash`,
	}
	if engine == "postgres" {
		names = append(names, fmt.Sprintf("postgresql://127.0.0.1:%d/%s", port, victim))
	}
	return names
}

// HostileDatabaseNames backs up and restores databases with hostile names
// (admission would refuse them; the agent must not trust it): each backup
// holds the hostile database's own content, each restore goes back into
// it, and the victim database a careless agent would reach is untouched.
func HostileDatabaseNames(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	victim := "victim_" + kind
	check(t, e.DB.Seed(victim))
	t.Cleanup(func() { e.DB.Drop(victim) })

	for i, name := range HostileNames(e.DB.Engine(), victim, e.DB.Port()) {
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			t.Logf("database name %q", name)
			marker := fmt.Sprintf("hostile-%d", i)
			check(t, e.DB.Drop(name))
			check(t, e.DB.Create(name))
			t.Cleanup(func() { e.DB.Drop(name) })
			_, err := e.DB.SQL(name, "CREATE TABLE hostile_marker (v text); INSERT INTO hostile_marker VALUES ('"+marker+"');")
			check(t, err)
			job := naming.Job{Namespace: "shop", Name: fmt.Sprintf("hostile-%s-%d", kind, i)}
			res := mustSucceed(t, e.agent(t, st, name, job, nil, "backup"))
			check(t, e.DB.Drop(name))
			// A restore that reaches the victim would undo this.
			check(t, e.DB.Mutate(victim))
			victimPrint := fingerprint(t, e.DB, victim)
			rr := mustSucceed(t, e.agent(t, st, name, job, nil, "restore"))
			if rr.Artifact != res.Artifact {
				t.Fatalf("restored %s, want %s", rr.Artifact, res.Artifact)
			}
			got, err := e.DB.SQL(name, "SELECT v FROM hostile_marker")
			if err != nil || got != marker {
				t.Fatalf("database %q after backup and restore: marker %q, %v; want %q", name, got, err, marker)
			}
			q := "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
			if e.DB.Engine() == "mysql" {
				q = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
			}
			if n, err := e.DB.SQL(name, q); err != nil || n != "1" {
				t.Fatalf("database %q after backup and restore has %s tables (%v), want only hostile_marker: its backup held another database", name, n, err)
			}
			if after := fingerprint(t, e.DB, victim); after != victimPrint {
				t.Fatalf("database %q reached the victim database %s:\nbefore:\n%s\nafter:\n%s", name, victim, victimPrint, after)
			}
		})
	}
}

// HostileHosts: a host that a client library would read as a socket
// directory, a host list or an option is refused before anything is done.
func HostileHosts(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	job := naming.Job{Namespace: "shop", Name: "hostile-host-" + kind}
	for _, host := range []string{"-h evil", "/var/run/postgresql", "a,b", "127.0.0.1 port=1", "h\x01", " 127.0.0.1"} {
		r := e.agent(t, st, "postgres", job, []string{"CAIRN_DB_HOST=" + host}, "backup")
		mustFail(t, r, "host")
		mustExit(t, r, contract.ExitUsage)
		if keys := st.Keys(t, job); len(keys) != 0 {
			t.Fatalf("a refused backup wrote %v", keys)
		}
	}
}
