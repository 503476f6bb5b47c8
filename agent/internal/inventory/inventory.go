// Package inventory lists the tables of a database that a filter selects and
// takes, per table, the row count and an order-independent content checksum,
// for PostgreSQL and MySQL/MariaDB, optionally inside a given snapshot. A
// backup records the inventory of its dump (taken in the dump's own
// snapshot) in the artifact's manifest; a migration compares the inventories
// of source and target; a restore can compare the target with the manifest.
//
// The checksum of a table is the sum modulo 2^64 of the first 64 bits of the
// MD5 of each row's text: independent of row order, and (unlike XOR) a row
// that appears twice does not cancel out. A row's text is PostgreSQL's
// record output (`t::text`) with the session's output settings fixed
// (TimeZone UTC, ISO dates, bytea hex, extra_float_digits 3, …), and for
// MySQL/MariaDB the values of the columns joined with ',' — string, binary,
// JSON, BIT, ENUM/SET and spatial columns as HEX() of their bytes,
// floating-point columns (FLOAT, DOUBLE) as the shortest text of their
// value as a DOUBLE (exact: a FLOAT's own text has 6 significant digits),
// other columns as their text in time zone +00:00, NULL as '~'. PostgreSQL's
// float4/float8 text is exact at extra_float_digits 3. Both sides of a
// comparison must be the same engine (the checksums of a PostgreSQL 13 and a
// PostgreSQL 16 server agree; those of MySQL and MariaDB may differ for
// floating-point and JSON columns).
package inventory

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/patterns"
)

// Methods of an inventory, as in a MigrationJob's spec.verify.
const (
	MethodList     = "List"     // names and sizes only
	MethodRowCount = "RowCount" // plus row counts
	MethodChecksum = "Checksum" // plus content checksums
)

// ValidMethod reports whether m is RowCount or Checksum (the methods a
// comparison can use).
func ValidMethod(m string) bool { return m == MethodRowCount || m == MethodChecksum }

// Table is one table's entry.
type Table struct {
	// Schema is the PostgreSQL schema; empty for MySQL/MariaDB (a migration
	// moves one database, whose name may differ on the target).
	Schema string `json:"schema,omitempty"`
	Name   string `json:"name"`
	// Rows is the row count (RowCount and Checksum inventories).
	Rows int64 `json:"rows"`
	// Checksum is 16 hex digits (Checksum inventories).
	Checksum string `json:"checksum,omitempty"`
	// Bytes is the table's size on disk as the server estimates it
	// (PostgreSQL: with indexes and TOAST; MySQL: data + index length).
	Bytes int64 `json:"bytes,omitempty"`
}

// Key is how the table is named in results: "schema.table" for
// PostgreSQL, "table" for MySQL/MariaDB. A schema or table name with a
// dot or a double quote is written quoted ("x"."y.z"): joined by a dot,
// "x"."y.z" and "x.y"."z" would share a key, and a comparison by key would
// compare one table's rows with the other's.
func (t Table) Key() string {
	switch {
	case t.Schema == "":
		return t.Name
	case strings.ContainsAny(t.Schema, `."`) || strings.ContainsAny(t.Name, `."`):
		return QualifiedName(t)
	}
	return t.Schema + "." + t.Name
}

// Inventory is the set of selected tables of one database.
type Inventory struct {
	// Method is List, RowCount or Checksum.
	Method string `json:"method"`
	// Consistent is true when every table was read in one snapshot (for a
	// backup: the dump's own).
	Consistent bool `json:"consistent"`
	// Tables are sorted by Key.
	Tables []Table `json:"tables"`
}

// Bytes is the sum of the tables' size estimates.
func (inv *Inventory) Bytes() int64 {
	var n int64
	for _, t := range inv.Tables {
		n += t.Bytes
	}
	return n
}

// Find returns the table with the given key.
func (inv *Inventory) Find(key string) (Table, bool) {
	i, ok := slices.BinarySearchFunc(inv.Tables, key, func(t Table, k string) int { return strings.Compare(t.Key(), k) })
	if !ok {
		return Table{}, false
	}
	return inv.Tables[i], true
}

func sortTables(ts []Table) {
	slices.SortFunc(ts, func(a, b Table) int { return strings.Compare(a.Key(), b.Key()) })
}

// Options say what to take.
type Options struct {
	// Filter selects tables; nil selects all.
	Filter *patterns.Filter
	// Method is List, RowCount or Checksum.
	Method string
	// Parallel is how many tables are counted at once (PostgreSQL; MySQL
	// reads in one connection, its only way to one snapshot). ≤ 1: one.
	Parallel int
	// Snapshot (PostgreSQL) is an exported snapshot (pg_export_snapshot)
	// to read in; empty: the inventory exports its own.
	Snapshot string
	// SchemaName (MySQL/MariaDB) is the name the schema part of a pattern
	// matches; empty: the database's own name. A migration passes the
	// source database's name on both sides.
	SchemaName string
}

// DB is an open connection to one database.
type DB interface {
	Engine() string
	// Version is the server's version string.
	Version(ctx context.Context) (string, error)
	// Tables lists the selected tables with their size estimates.
	Tables(ctx context.Context, f *patterns.Filter, schemaName string) ([]Table, error)
	// Take takes an inventory.
	Take(ctx context.Context, o Options) (*Inventory, error)
	Close() error
}

// Open connects to the database c names.
func Open(ctx context.Context, engineName string, c engine.Conn) (DB, error) {
	switch engineName {
	case "postgres":
		return OpenPostgres(ctx, c)
	case "mysql":
		return OpenMySQL(ctx, c)
	}
	return nil, fmt.Errorf("unknown engine %q (want postgres or mysql)", engineName)
}

// Take connects, takes an inventory and disconnects.
func Take(ctx context.Context, engineName string, c engine.Conn, o Options) (*Inventory, error) {
	db, err := Open(ctx, engineName, c)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.Take(ctx, o)
}

var two64 = new(big.Int).Lsh(big.NewInt(1), 64)

// foldSum reduces a decimal sum of (signed or unsigned) 64-bit values
// modulo 2^64 and formats it as 16 hex digits.
func foldSum(decimal string) (string, error) {
	n, ok := new(big.Int).SetString(strings.TrimSpace(decimal), 10)
	if !ok {
		return "", fmt.Errorf("checksum sum %q is not an integer", decimal)
	}
	n.Mod(n, two64) // Euclidean: always in [0, 2^64)
	return fmt.Sprintf("%016x", n), nil
}
