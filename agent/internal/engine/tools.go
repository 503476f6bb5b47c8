package engine

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The tools a run uses, chosen for the server in front of it (package
// toolset): a PostgreSQL bin folder put first on PATH (so pg_dump,
// pg_restore, pg_basebackup, pg_receivewal and the point-in-time server are
// all of that major), and for MySQL and MariaDB the path of each client
// tool of the server's own flavour. One agent process runs one command
// against one server, so the choice is process-wide.
var (
	toolsMu sync.RWMutex
	toolFor = map[string]string{}
	// mysqlFlavor is "mysql" when the chosen mysqldump is Oracle MySQL's,
	// "mariadb" (or "", not chosen) otherwise.
	mysqlFlavor string
)

// UsePGBin puts dir first on the process's PATH: every PostgreSQL program
// the agent and its children run is then taken from it.
func UsePGBin(dir string) {
	path := os.Getenv("PATH")
	parts := []string{dir}
	for _, p := range filepath.SplitList(path) {
		if p != dir && p != "" {
			parts = append(parts, p)
		}
	}
	os.Setenv("PATH", strings.Join(parts, string(os.PathListSeparator)))
}

// UseTool makes the tool called name (e.g. mysqldump) run the program at
// path; flavor is "mysql" for Oracle MySQL's client tools, "mariadb" for
// MariaDB's.
func UseTool(name, path, flavor string) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	toolFor[name] = path
	if name == "mysqldump" {
		mysqlFlavor = flavor
	}
}

// ResetTools forgets UseTool's choices (tests).
func ResetTools() {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	toolFor = map[string]string{}
	mysqlFlavor = ""
}

func chosenTool(name string) (string, bool) {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	p, ok := toolFor[name]
	return p, ok
}

// oracleMySQLDump: the chosen mysqldump is Oracle MySQL's.
func oracleMySQLDump() bool {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	return mysqlFlavor == "mysql"
}
