package testenv

import (
	"strings"
	"testing"
)

// TestMatrixServersStart starts each server of the chosen matrix
// (CAIRN_DB_MATRIX) and checks it is the version it claims, that the
// agent's user can log in over TCP (MySQL: with caching_sha2_password),
// and that Stop removes its container.
func TestMatrixServersStart(t *testing.T) {
	servers, err := MatrixServers("")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) {
			db, err := StartMatrix(s, "cairn", "pw-Matrix-1", false)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					db.Stop()
				}
			}()
			v, err := db.Version()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(v, s.Major+".") {
				t.Fatalf("%s reports version %q, want %s.x", s.Name, v, s.Major)
			}
			if s.Engine == "mysql" {
				plugin, err := db.SQL("", "SELECT plugin FROM mysql.user WHERE user = 'cairn'")
				if err != nil || plugin != "caching_sha2_password" {
					t.Fatalf("the agent's user authenticates with %q (%v), want caching_sha2_password", plugin, err)
				}
				if gtid, err := db.SQL("", "SELECT @@gtid_mode"); err != nil || gtid != "ON" {
					t.Fatalf("gtid_mode %q (%v), want ON", gtid, err)
				}
			}
			c := containerOf(db)
			if (c == nil) != (s.Image == "") {
				t.Fatalf("%s: container %v for image %q", s.Name, c, s.Image)
			}
			db.Stop()
			stopped = true
			if c != nil {
				if err := c.Running(); err == nil {
					t.Fatalf("container %s still runs after Stop", c.Name)
				}
			}
		})
	}
}

func containerOf(db DB) *Container {
	switch d := db.(type) {
	case *PostgresContainer:
		return d.Container
	case *MySQLContainer:
		return d.Container
	}
	return nil
}

func TestMatrixSelection(t *testing.T) {
	t.Setenv(EnvMatrix, "all")
	if all, err := MatrixServers(""); err != nil || len(all) != len(Matrix) {
		t.Fatalf("all: %d servers, %v", len(all), err)
	}
	t.Setenv(EnvMatrix, "")
	ci, err := MatrixServers("postgres")
	if err != nil || len(ci) != 2 || ci[0].Name != "pg13" || ci[1].Name != "pg18" {
		t.Fatalf("ci postgres: %v, %v", ci, err)
	}
	t.Setenv(EnvMatrix, "pg17,nope")
	if _, err := MatrixServers(""); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("an unknown name: %v", err)
	}
}
