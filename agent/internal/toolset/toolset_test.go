package toolset

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePostgres(t *testing.T) {
	for _, c := range []struct {
		num, version string
		major, minor int
		want         string
	}{
		{"150020", "15.20 (Debian 15.20-0+deb12u1)", 15, 20, "15.20"},
		{"180001", "18.1 (Debian 18.1-1)", 18, 1, "18.1"},
		{"130022", "13.22", 13, 22, "13.22"},
		{"90624", "9.6.24", 9, 6, "9.6.24"},
	} {
		s, err := parsePostgres(c.num, c.version)
		if err != nil || s.Major != c.major || s.Minor != c.minor || s.Version != c.want || s.Engine != "postgres" {
			t.Errorf("parsePostgres(%q, %q) = %+v, %v", c.num, c.version, s, err)
		}
	}
	if _, err := parsePostgres("abc", "x"); err == nil {
		t.Error("parsePostgres accepted a non-number")
	}
}

func TestParseMySQL(t *testing.T) {
	for _, c := range []struct {
		version, comment, engine, want string
		major, minor                   int
	}{
		{"9.7.4", "MySQL Community Server - GPL", "mysql", "9.7.4", 9, 7},
		{"8.4.3-log", "Debian", "mysql", "8.4.3", 8, 4},
		{"11.8.3-MariaDB-1 from Debian", "Debian n/a", "mariadb", "11.8.3", 11, 8},
		{"10.11.14-MariaDB-0+deb12u2", "Debian 12", "mariadb", "10.11.14", 10, 11},
		{"5.5.5-10.6.1-MariaDB", "mariadb.org binary distribution", "mariadb", "10.6.1", 10, 6},
	} {
		s, err := parseMySQL(c.version, c.comment)
		if err != nil || s.Engine != c.engine || s.Version != c.want || s.Major != c.major || s.Minor != c.minor {
			t.Errorf("parseMySQL(%q, %q) = %+v, %v", c.version, c.comment, s, err)
		}
	}
}

func tools() Tools {
	return Tools{
		PG: map[int]string{15: "/pg/15/bin", 17: "/pg/17/bin"},
		MySQL: map[string][]Tool{
			"mysqldump": {{Path: "/mariadb-dump", Flavor: "mariadb", Major: 11, Minor: 8}, {Path: "/mysqldump", Flavor: "mysql", Major: 9, Minor: 7}},
			"mysql":     {{Path: "/mariadb", Flavor: "mariadb", Major: 11, Minor: 8}, {Path: "/mysql", Flavor: "mysql", Major: 9, Minor: 7}},
		},
	}
}

func TestChoosePostgres(t *testing.T) {
	for _, c := range []struct {
		major int
		p     Purpose
		want  string // "" when unsupported
	}{
		{13, Dump, "/pg/15/bin"},    // the lowest major >= the server's
		{15, Dump, "/pg/15/bin"},    // today's PostgreSQL 15 with 15
		{16, Dump, "/pg/17/bin"},    // 16 by the rule "a major >= the server's"
		{13, Restore, "/pg/17/bin"}, // the highest: reads every older archive
		{17, Recover, "/pg/17/bin"}, // exactly the source's major
		{16, Recover, ""},
		{18, Dump, ""},
		{18, Restore, ""},
	} {
		got, err := tools().Choose(Server{Engine: "postgres", Version: "x", Major: c.major}, c.p)
		var ue *UnsupportedError
		switch {
		case c.want == "" && !errors.As(err, &ue):
			t.Errorf("PostgreSQL %d purpose %d: got %q, %v; want an UnsupportedError", c.major, c.p, got.PGBin, err)
		case c.want != "" && (err != nil || got.PGBin != c.want):
			t.Errorf("PostgreSQL %d purpose %d: got %q, %v; want %q", c.major, c.p, got.PGBin, err, c.want)
		}
	}
	_, err := tools().Choose(Server{Engine: "postgres", Version: "18.1", Major: 18, Minor: 1}, Dump)
	if msg := err.Error(); !strings.Contains(msg, "PostgreSQL 18.1") || !strings.Contains(msg, "PostgreSQL 17 and older") {
		t.Errorf("message %q: want the server's version and the supported range", msg)
	}
}

func TestChooseMySQLFamily(t *testing.T) {
	c, err := tools().Choose(Server{Engine: "mysql", Version: "9.7.4", Major: 9, Minor: 7}, Dump)
	if err != nil || c.MySQL["mysqldump"].Path != "/mysqldump" || c.MySQL["mysql"].Path != "/mysql" {
		t.Errorf("MySQL 9.7: %+v, %v; want Oracle's tools", c.MySQL, err)
	}
	c, err = tools().Choose(Server{Engine: "mariadb", Version: "10.11.14", Major: 10, Minor: 11}, Restore)
	if err != nil || c.MySQL["mysqldump"].Path != "/mariadb-dump" || c.MySQL["mysql"].Path != "/mariadb" {
		t.Errorf("MariaDB 10.11: %+v, %v; want MariaDB's tools", c.MySQL, err)
	}
	// MariaDB's tools only: a MySQL server is refused, and so is a MySQL
	// newer than Oracle's client.
	only := tools()
	only.MySQL["mysqldump"] = only.MySQL["mysqldump"][:1]
	var ue *UnsupportedError
	if _, err := only.Choose(Server{Engine: "mysql", Version: "9.7.4", Major: 9, Minor: 7}, Dump); !errors.As(err, &ue) ||
		!strings.Contains(err.Error(), "MySQL 9.7.4") || !strings.Contains(err.Error(), "MariaDB (its 11.8 client tools)") {
		t.Errorf("MySQL with MariaDB's tools only: %v; want an UnsupportedError naming both", err)
	}
	if _, err := tools().Choose(Server{Engine: "mysql", Version: "9.8.0", Major: 9, Minor: 8}, Dump); !errors.As(err, &ue) {
		t.Errorf("MySQL 9.8 with a 9.7 client: %v; want an UnsupportedError", err)
	}
}
