package inventory

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/testenv"
)

// Issue 47, item 1: a server that asks for the password in clear (pg_hba
// `password`; as one a changed spec.database.host could name would) never
// receives it from the agent's Go driver — while libpq 15's psql, asked
// the same, sends it and logs in (the server really asks in clear). SCRAM
// still connects.
func TestNoPasswordInClear(t *testing.T) {
	needPG(t)
	const role, pw = "cairn_clear", "clear-PASSWORD-90ad"
	if _, err := pg.SQL("postgres", "CREATE ROLE "+role+" LOGIN PASSWORD '"+pw+"'"); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(pg.Dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(hba, old, 0o600)
		pg.SQL("postgres", "SELECT pg_reload_conf(); DROP ROLE "+role)
	})
	if err := os.WriteFile(hba, append([]byte("host all "+role+" 127.0.0.1/32 password\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.SQL("postgres", "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	conn := engine.Conn{Host: "127.0.0.1", Port: pg.Port, User: role, Password: pw}
	// The control: libpq 15 (no require_auth) answers the server's
	// request for the password in clear, and gets in.
	psql := exec.Command(filepath.Join(testenv.PGBinDir, "psql"), "-X", "-At", "-c", "SELECT current_user",
		"host=127.0.0.1 port="+strconv.Itoa(pg.Port)+" user="+role+" dbname=postgres")
	psql.Env = []string{"PGPASSWORD=" + pw}
	if out, err := psql.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != role {
		t.Fatalf("psql 15 with the password in clear: %v: %s (the server does not ask for it in clear: the test proves nothing)", err, out)
	}
	c, err := ConnectPostgres(context.Background(), conn, "postgres")
	if err == nil {
		c.Close(context.Background())
		t.Fatal("the agent's driver sent the password in clear to a server that asked for it so")
	}
	if !strings.Contains(err.Error(), "require_auth") || strings.Contains(err.Error(), pw) {
		t.Errorf("refused with %v, want the require_auth refusal (and no password in it)", err)
	}
	// SCRAM (the test server's own) still connects.
	c, err = ConnectPostgres(context.Background(), pgConn("postgres"), "postgres")
	if err != nil {
		t.Fatalf("connecting with SCRAM: %v", err)
	}
	c.Close(context.Background())
}
