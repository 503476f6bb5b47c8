package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Several MariaDB bootstraps at once, as `go test ./...` starts them in
// packages side by side: each must succeed. With the bootstrap's temporary
// tables in the shared /tmp, a mariadbd starting beside it deleted them
// ("Unknown table 'mysql.tmp_proxies_priv'", issue 52); each bootstrap now
// has its own tmpdir.
func TestConcurrentMariaDBBootstraps(t *testing.T) {
	installDB, err := lookBinary("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		t.Fatal(err)
	}
	// Each bootstrap starts once the one before it is writing its system
	// tables: a mariadbd starting sweeps its tmpdir of #sql* files, so
	// the bootstraps overlap where they used to collide.
	const n, rounds = 6, 1
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = bootstrapMariaDB(installDB, dir, data)
			}()
			_ = Poll(30*time.Second, 5*time.Millisecond, func() error {
				if _, err := os.Stat(filepath.Join(data, "mysql", "db.frm")); err != nil {
					return err
				}
				return nil
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, bootstrap %d of %d side by side: %v", round, i+1, n, err)
			}
		}
	}
}

// The mechanism behind issue 52's failure, shown without a race: a
// mariadbd starting (a bootstrap too) deletes every #sql* file in its
// tmpdir, so a bootstrap with the shared /tmp as its tmpdir deleted the
// temporary tables of another package's bootstrap running beside it. A
// bootstrap now leaves the shared temporary folder alone: a canary file
// named as a temporary table there survives it.
func TestMariaDBBootstrapLeavesSharedTmpAlone(t *testing.T) {
	installDB, err := lookBinary("mariadb-install-db", "/usr/bin/mariadb-install-db")
	if err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(os.TempDir(), fmt.Sprintf("#sql-temptable-cairn-canary-%d.MAI", os.Getpid()))
	if err := os.WriteFile(canary, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(canary)
	dir := t.TempDir()
	if err := bootstrapMariaDB(installDB, dir, filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Fatalf("the bootstrap deleted %s, a file of the shared temporary folder (another server's temporary table): %v", canary, err)
	}
}

// A port FreePort handed to one process is never handed to another while
// the first lives: a second process cannot reserve it.
func TestFreePortReservedAcrossProcesses(t *testing.T) {
	if p := os.Getenv("CAIRN_TEST_RESERVE_PORT"); p != "" {
		port, _ := strconv.Atoi(p)
		ok, err := reservePort(port)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("reserved=%v\n", ok)
		return
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortReservedAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAIRN_TEST_RESERVE_PORT="+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	if want := "reserved=false"; !slices.Contains(strings.Split(string(out), "\n"), want) {
		t.Fatalf("another process reserved port %d that this one holds: child printed %q, want a line %q", port, out, want)
	}
	// And in this process, FreePort never hands the same port out twice.
	seen := map[int]bool{port: true}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("FreePort handed out port %d twice", p)
		}
		seen[p] = true
	}
}
