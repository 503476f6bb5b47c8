package engine

import (
	"context"
	"io"
	"strings"
)

// MySQL dumps with `mysqldump --single-transaction` (a consistent snapshot
// of InnoDB tables without locking them) as SQL text, blobs in hex, and
// restores by piping that SQL into `mysql`. The dump has no CREATE DATABASE
// or USE statement, so it restores into whichever database the restore
// names. Works with the MariaDB and the MySQL client tools.
type MySQL struct {
	Conn
	// Tables, when set, restricts Dump to these tables of the database.
	Tables []string
	// NoData dumps the schema only (mysqldump --no-data).
	NoData bool
	// SkipTriggers leaves triggers out (a parallel copy creates them after
	// the rows, so they do not fire for copied rows).
	SkipTriggers bool
	// TriggersOnly dumps the triggers of the tables and nothing else (no
	// tables, views, rows, routines or events).
	TriggersOnly bool
	// ForParts dumps for a multi-part artifact: without LOCK TABLES and
	// ALTER TABLE … DISABLE KEYS around each table's rows (parts of one
	// table load at once, over several connections).
	ForParts bool
	// IgnoreTables are left out of a dump of the whole database (another
	// dump of the same snapshot has them).
	IgnoreTables []string
	// NoRoutines leaves routines and events out (another dump of the same
	// snapshot has them); triggers stay with their tables.
	NoRoutines bool
	// BinlogPosition records in the dump's head where its snapshot stands
	// in the server's binary log (--master-data=2, a comment), so the dump
	// is a base for point-in-time recovery (package pitr). It needs the
	// RELOAD and BINLOG MONITOR (REPLICATION CLIENT) privileges: the
	// snapshot is taken under a brief global read lock.
	BinlogPosition bool
	// Head is the start of the last dump's output (64 KiB at most), where
	// a BinlogPosition dump writes its position.
	Head []byte
}

// headLen is how much of a dump's start Head keeps.
const headLen = 64 << 10

// headWriter passes writes on and keeps their first headLen bytes.
type headWriter struct {
	w    io.Writer
	head *[]byte
}

func (h headWriter) Write(b []byte) (int, error) {
	if n := headLen - len(*h.head); n > 0 {
		*h.head = append(*h.head, b[:min(n, len(b))]...)
	}
	return h.w.Write(b)
}

func (m *MySQL) Name() string   { return "mysql" }
func (m *MySQL) Format() string { return "mysqldump-sql" }

func (m *MySQL) env() []string { return childEnv("MYSQL_PWD=" + m.Password) }

// connArgs connects a tool to the server. Each value is joined to its
// option with "=" in one argument, so it is only ever that option's value;
// the database name, the one positional argument, follows "--" (end of
// options) in Dump and is --database=<name> in Restore.
func (m *MySQL) connArgs() []string {
	return []string{
		"--no-defaults", // ignore my.cnf files in the image: the agent's flags are the truth
		"--protocol=TCP", "--host=" + m.Host, "--port=" + itoa(m.Port), "--user=" + m.User,
		"--default-character-set=utf8mb4",
	}
}

func (m *MySQL) Dump(ctx context.Context, w io.Writer) error {
	args := append(m.connArgs(), "--single-transaction", "--quick", "--hex-blob", "--no-tablespaces")
	switch {
	case m.TriggersOnly:
		args = append(args, "--no-data", "--no-create-info", "--skip-routines", "--skip-events", "--triggers")
	case m.NoRoutines:
		args = append(args, "--skip-routines", "--skip-events", "--triggers")
	case m.SkipTriggers:
		args = append(args, "--routines", "--events", "--skip-triggers")
	default:
		args = append(args, "--routines", "--triggers", "--events")
	}
	if m.ForParts {
		args = append(args, "--skip-add-locks", "--skip-disable-keys")
	}
	if oracleMySQLDump() {
		// Oracle's mysqldump writes SET @@GLOBAL.GTID_PURGED into the dump
		// of a server with GTIDs on: a restore into any server that has
		// executed those transactions (the source itself) fails on it, and a
		// logical restore must not change the target's GTID state.
		args = append(args, "--set-gtid-purged=OFF")
	}
	if m.BinlogPosition && oracleMySQLDump() {
		// MySQL 8.0.26 renamed --master-data (removed since).
		args = append(args, "--source-data=2")
		m.Head = m.Head[:0]
		w = headWriter{w: w, head: &m.Head}
	} else if m.BinlogPosition {
		args = append(args, "--master-data=2")
		m.Head = m.Head[:0]
		w = headWriter{w: w, head: &m.Head}
	}
	for _, t := range m.IgnoreTables {
		args = append(args, "--ignore-table="+m.Database+"."+t)
	}
	if m.NoData && !m.TriggersOnly {
		args = append(args, "--no-data")
	}
	// After "--" every argument is a name: the database, then tables.
	args = append(append(args, "--", m.Database), m.Tables...)
	return run(ctx, m.Password, nil, w, m.env(), "mysqldump", args...)
}

// Prepare creates the target database when it does not exist.
func (m *MySQL) Prepare(ctx context.Context) error {
	q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(m.Database, "`", "``") + "`;\n"
	args := append(m.connArgs(), "--connect-timeout=15")
	return run(ctx, m.Password, strings.NewReader(q), io.Discard, m.env(), "mysql", args...)
}

func (m *MySQL) Restore(ctx context.Context, r io.Reader) error {
	args := append(m.connArgs(), "--connect-timeout=15", "--binary-mode", "--database="+m.Database)
	return run(ctx, m.Password, r, io.Discard, m.env(), "mysql", args...)
}
