package toolset

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/engine"
)

// PGLibDir holds one bin folder per PostgreSQL major installed (Debian's
// and Ubuntu's layout: /usr/lib/postgresql/<major>/bin).
var PGLibDir = "/usr/lib/postgresql"

// Tool is one client program found in the image.
type Tool struct {
	Path string
	// Flavor is "mysql" (Oracle MySQL) or "mariadb" for the MySQL-family
	// tools, "postgres" for PostgreSQL's.
	Flavor       string
	Major, Minor int
}

// Tools is what the image carries.
type Tools struct {
	// PG maps a PostgreSQL major to its bin folder (with pg_dump in it).
	PG map[int]string
	// MySQL maps a tool's MySQL name (mysqldump, mysql, mysqlbinlog) to
	// the programs found for it, of either flavour.
	MySQL map[string][]Tool
}

// Scan finds the tools: every PGLibDir/<major>/bin holding pg_dump (else a
// pg_dump on PATH, its major read from --version), and the MySQL and
// MariaDB client programs on PATH under either name (mysqldump and
// mariadb-dump, ...), each classed by its --version.
func Scan(ctx context.Context) Tools {
	t := Tools{PG: map[int]string{}, MySQL: map[string][]Tool{}}
	dirs, _ := filepath.Glob(filepath.Join(PGLibDir, "*", "bin", "pg_dump"))
	for _, d := range dirs {
		if m, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(d)))); err == nil {
			t.PG[m] = filepath.Dir(d)
		}
	}
	if len(t.PG) == 0 {
		if p, err := exec.LookPath("pg_dump"); err == nil {
			if v, ok := version(ctx, p); ok && v.Flavor == "postgres" {
				t.PG[v.Major] = filepath.Dir(p)
			}
		}
	}
	seen := map[string]bool{}
	for _, names := range [][2]string{{"mysqldump", "mariadb-dump"}, {"mysql", "mariadb"}, {"mysqlbinlog", "mariadb-binlog"}} {
		for _, n := range names {
			p, err := exec.LookPath(n)
			if err != nil {
				continue
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil || seen[names[0]+real] {
				continue
			}
			seen[names[0]+real] = true
			if v, ok := version(ctx, p); ok && v.Flavor != "postgres" {
				t.MySQL[names[0]] = append(t.MySQL[names[0]], v)
			}
		}
	}
	return t
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)`)

// version runs `path --version`: "pg_dump (PostgreSQL) 15.20 (Debian …)",
// "mysqldump  Ver 9.7.0 for Linux on x86_64 (MySQL Community Server -
// GPL)", "mariadb-dump from 11.8.3-MariaDB, client 10.19 for
// debian-linux-gnu (x86_64)", "mysqldump  Ver 10.19 Distrib
// 10.11.14-MariaDB, for debian-linux-gnu (x86_64)".
func version(ctx context.Context, path string) (Tool, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	// Nothing of the agent's environment (its secrets), as every tool.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		return Tool{}, false
	}
	line, _, _ := strings.Cut(string(out), "\n")
	t := Tool{Path: path, Flavor: "mysql"}
	switch {
	case strings.Contains(line, "PostgreSQL"):
		t.Flavor = "postgres"
	case strings.Contains(line, "MariaDB"):
		t.Flavor = "mariadb"
		// The server version it came with, not the client protocol's.
		if i := strings.Index(line, "-MariaDB"); i >= 0 {
			line = line[:i]
			line = line[strings.LastIndexAny(line, " \t")+1:]
		}
	default:
		line = strings.TrimPrefix(line[strings.Index(line, "Ver")+1:], "er")
	}
	m := versionRE.FindStringSubmatch(line)
	if m == nil {
		return Tool{}, false
	}
	t.Major, _ = strconv.Atoi(m[1])
	t.Minor, _ = strconv.Atoi(m[2])
	return t, true
}

// Purpose says what the tools are for.
type Purpose int

const (
	// Dump: pg_dump, pg_basebackup, pg_receivewal, mysqldump of a major
	// at least the server's; the lowest such major (the server's own when
	// present), so the artifact is readable by the most restore tools.
	Dump Purpose = iota
	// Restore: pg_restore, psql, mysql of a major at least the server's;
	// the highest such (it reads archives of every older pg_dump).
	Restore
	// Recover: a point-in-time replay: the PostgreSQL server of exactly
	// the source's major.
	Recover
)

// UnsupportedError: no tool of this image can serve the server. The agent
// exits with contract.ExitUnsupported and reports
// contract.CodeUnsupportedServer: running it again cannot succeed, another
// agent image (tools of another major) is needed.
type UnsupportedError struct {
	Server Server
	// Supported is the range this image serves, e.g. "PostgreSQL 15 and
	// older", "MariaDB servers only (no Oracle MySQL client)".
	Supported string
	// Need says what tools would serve the server.
	Need string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported server version: %s cannot be served by this agent image's tools (it supports %s); %s",
		e.Server, e.Supported, e.Need)
}

// Code is the failure code of the result report.
func (e *UnsupportedError) Code() string { return contract.CodeUnsupportedServer }

// Choice is the tools chosen for a server.
type Choice struct {
	Server Server
	// PGBin is the PostgreSQL bin folder (PostgreSQL only).
	PGBin   string
	PGMajor int
	// MySQL maps a tool's MySQL name to the program chosen (MySQL and
	// MariaDB only).
	MySQL map[string]Tool
}

// Describe says what was chosen, for the log.
func (c Choice) Describe() string {
	if c.PGBin != "" {
		return fmt.Sprintf("PostgreSQL %d tools (%s)", c.PGMajor, c.PGBin)
	}
	var parts []string
	for _, n := range []string{"mysqldump", "mysql", "mysqlbinlog"} {
		if t, ok := c.MySQL[n]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s (%s %d.%d)", n, t.Path, t.Flavor, t.Major, t.Minor))
		}
	}
	return strings.Join(parts, " ")
}

// Choose picks, from t, tools that can serve s for p.
func (t Tools) Choose(s Server, p Purpose) (Choice, error) {
	c := Choice{Server: s}
	if s.Engine == "postgres" {
		majors := make([]int, 0, len(t.PG))
		for m := range t.PG {
			majors = append(majors, m)
		}
		slices.Sort(majors)
		unsupported := &UnsupportedError{Server: s, Supported: pgRange(majors, p),
			Need: fmt.Sprintf("use an agent image with PostgreSQL %d tools", s.Major)}
		if p != Recover {
			unsupported.Need = fmt.Sprintf("use an agent image with PostgreSQL %d (or newer) tools", s.Major)
		}
		for _, m := range majors {
			ok := m >= s.Major
			if p == Recover {
				ok = m == s.Major
			}
			if ok && (c.PGBin == "" || p == Restore) {
				c.PGBin, c.PGMajor = t.PG[m], m
			}
		}
		if c.PGBin == "" {
			return c, unsupported
		}
		return c, nil
	}
	c.MySQL = map[string]Tool{}
	for _, name := range []string{"mysqldump", "mysql", "mysqlbinlog"} {
		var best *Tool
		for i, tool := range t.MySQL[name] {
			if tool.Flavor != s.Engine {
				continue
			}
			// Oracle MySQL: a client at least the server's series (8.0's
			// mysqldump misreads 8.4's and 9.x's catalogs). MariaDB: any
			// MariaDB client, the newest found.
			if s.Engine == "mysql" && tool.Major*1000+tool.Minor < s.Major*1000+s.Minor {
				continue
			}
			if best == nil || tool.Major*1000+tool.Minor > best.Major*1000+best.Minor {
				best = &t.MySQL[name][i]
			}
		}
		if best != nil {
			c.MySQL[name] = *best
		}
	}
	if _, ok := c.MySQL["mysqldump"]; !ok {
		return c, &UnsupportedError{Server: s, Supported: mysqlRange(t),
			Need: fmt.Sprintf("use an agent image with %s's own client tools, %d.%d or newer", s.Name(), s.Major, s.Minor)}
	}
	if _, ok := c.MySQL["mysql"]; !ok {
		return c, &UnsupportedError{Server: s, Supported: mysqlRange(t),
			Need: fmt.Sprintf("the image has %s's mysqldump but not its mysql client", s.Name())}
	}
	return c, nil
}

func pgRange(majors []int, p Purpose) string {
	if len(majors) == 0 {
		return "no PostgreSQL server: it carries no PostgreSQL tools"
	}
	if p == Recover {
		var s []string
		for _, m := range majors {
			s = append(s, strconv.Itoa(m))
		}
		return "point-in-time recovery of PostgreSQL " + strings.Join(s, ", ") + " only"
	}
	return fmt.Sprintf("PostgreSQL %d and older", majors[len(majors)-1])
}

func mysqlRange(t Tools) string {
	var s []string
	for _, tool := range t.MySQL["mysqldump"] {
		name := "MySQL"
		if tool.Flavor == "mariadb" {
			name = "MariaDB"
		}
		s = append(s, fmt.Sprintf("%s (its %d.%d client tools)", name, tool.Major, tool.Minor))
	}
	if len(s) == 0 {
		return "no MySQL or MariaDB server: it carries no mysqldump"
	}
	return strings.Join(s, ", ")
}

// Apply makes the run use c's tools.
func (c Choice) Apply() {
	if c.PGBin != "" {
		engine.UsePGBin(c.PGBin)
		engine.PGVersions(c.PGMajor, c.Server.Major)
	}
	for name, t := range c.MySQL {
		engine.UseTool(name, t.Path, t.Flavor)
		// The MariaDB names too, for code that asks for them.
		if alias, ok := map[string]string{"mysqldump": "mariadb-dump", "mysql": "mariadb", "mysqlbinlog": "mariadb-binlog"}[name]; ok {
			engine.UseTool(alias, t.Path, t.Flavor)
		}
	}
}

// Prepare detects the server of c (database db, see Detect), chooses tools
// for p among those of this image and applies them. The server is
// returned whenever it was detected, also with an *UnsupportedError.
func Prepare(ctx context.Context, engineName string, c engine.Conn, db string, p Purpose) (Server, Choice, error) {
	if c.Port == 0 {
		c.Port = map[string]int{"postgres": 5432, "mysql": 3306}[engineName]
	}
	s, err := Detect(ctx, engineName, c, db)
	if err != nil {
		return s, Choice{}, err
	}
	choice, err := Scan(ctx).Choose(s, p)
	if err != nil {
		return s, choice, &contract.CodedError{Code: contract.CodeUnsupportedServer, Err: err}
	}
	choice.Apply()
	return s, choice, nil
}
