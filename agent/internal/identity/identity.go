// Package identity decides whether two database coordinates name the same
// database by asking the servers, not by comparing the spelling of their
// addresses. It is the agent's authoritative guard against writing into the
// database a migration reads from or a backup was taken of: "orders-db",
// "orders-db.shop.svc.cluster.local", 10.0.3.7, a headless pod name, a
// second Service or an ExternalName all reach one server, and only the
// server can say so.
//
// A server is identified by what it reports about itself:
//
//   - PostgreSQL: system_identifier from pg_control_system(), unique per
//     cluster (initdb) and shared by its physical standbys; the database
//     by its OID and name. When pg_control_system() is not executable by
//     the user (PUBLIC may execute it by default; a DBA can revoke it), a
//     live pair is compared by a probe instead: the source session sets a
//     random application_name and the target session looks for that
//     backend in pg_stat_activity (visible to every user).
//   - MySQL: @@server_uuid; MariaDB, which has none: @@hostname, @@port and
//     @@datadir together. The schema by name, compared case-insensitively
//     when the server folds names (lower_case_table_names ≠ 0).
//
// A database that does not exist on the target is never the source: it has
// nothing to overwrite.
package identity

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// ID is a database's identity as its server reports it. It is recorded in
// backup and export manifests (catalog.Entry.Source) so that a restore or
// an import can recognise the database the artifact came from without the
// source's credentials.
type ID struct {
	// Engine is postgres or mysql.
	Engine string `json:"engine"`
	// Server identifies the server: "system_identifier=7301…" (PostgreSQL),
	// "server_uuid=…" (MySQL), "hostname=… port=… datadir=…" (MariaDB).
	// Empty when the server would not say (see Unknown).
	Server string `json:"server,omitempty"`
	// Database is the database (schema) name as the server reports it.
	Database string `json:"database"`
	// OID is the PostgreSQL database's OID; 0 for MySQL.
	OID uint32 `json:"oid,omitempty"`
	// FoldCase: the MySQL server compares schema names case-insensitively
	// (lower_case_table_names ≠ 0).
	FoldCase bool `json:"foldCase,omitempty"`
	// Unknown says why Server is empty (not compared).
	Unknown string `json:"unknown,omitempty"`
}

// String describes the identity for messages.
func (id ID) String() string {
	s := fmt.Sprintf("database %q", id.Database)
	if id.OID != 0 {
		s += fmt.Sprintf(" (oid %d)", id.OID)
	}
	if id.Server != "" {
		return s + " on the server with " + id.Server
	}
	return s + " on a server that did not identify itself (" + id.Unknown + ")"
}

// SameError refuses a write: the target is the source (or the database a
// backup was taken of). It names both addresses and what matched.
type SameError struct {
	// What the write was, e.g. "copy", "restore".
	Action string
	// Source and Target describe the two sides: their addresses as
	// configured ("127.0.0.1:5432/orders"), or the backup's recorded source.
	Source, Target string
	// Matched says what the servers reported in common.
	Matched string
	// Hint says what to do instead.
	Hint string
}

func (e *SameError) Error() string {
	s := fmt.Sprintf("refusing to %s: the target %s is the source %s (%s); nothing was written", e.Action, e.Target, e.Source, e.Matched)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Address names coordinates in messages: "host:port/database".
func Address(c engine.Conn) string {
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}

// Match compares two identities. known is false when either server is
// unidentified (the caller then probes, or says it could not check).
func Match(a, b ID) (same bool, matched string, known bool) {
	if a.Engine != b.Engine {
		return false, "", true
	}
	if a.Server == "" || b.Server == "" {
		return false, "", false
	}
	if a.Server != b.Server {
		return false, "", true
	}
	switch {
	case a.OID != 0 && a.OID == b.OID:
		return true, fmt.Sprintf("the same server (%s) and database oid %d", a.Server, a.OID), true
	case sameName(a, b):
		return true, fmt.Sprintf("the same server (%s) and database name %q", a.Server, b.Database), true
	}
	return false, "", true
}

// sameName: one server, one database name (under the server's case rule).
func sameName(a, b ID) bool {
	if a.FoldCase || b.FoldCase {
		return strings.EqualFold(a.Database, b.Database)
	}
	return a.Database == b.Database
}

// Read connects to c's database and returns its identity; exists is false
// (and the ID empty) when the database does not exist on that server.
func Read(ctx context.Context, engineName string, c engine.Conn) (id ID, exists bool, err error) {
	switch engineName {
	case "postgres":
		conn, exists, err := connectPG(ctx, c)
		if err != nil || !exists {
			return ID{}, exists, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		id, err := readPG(ctx, conn)
		return id, true, err
	case "mysql":
		pool, conn, err := inventory.ConnectMySQL(ctx, c, "")
		if err != nil {
			return ID{}, false, err
		}
		defer pool.Close()
		defer conn.Close()
		return readMySQL(ctx, conn, c.Database)
	}
	return ID{}, false, fmt.Errorf("unknown engine %q", engineName)
}

// CheckPair refuses (a *SameError) when target is the source database,
// asking both servers. A target database that does not exist yet is not
// the source. action names the write for the message.
func CheckPair(ctx context.Context, engineName, action string, source, target engine.Conn) error {
	refuse := func(matched string) error {
		return &SameError{Action: action, Source: Address(source), Target: Address(target), Matched: matched,
			Hint: "migrate into another database or server"}
	}
	switch engineName {
	case "postgres":
		src, ok, err := connectPG(ctx, source)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if !ok {
			return fmt.Errorf("source: database %q does not exist on %s:%d", source.Database, source.Host, source.Port)
		}
		defer src.Close(context.WithoutCancel(ctx))
		tgt, ok, err := connectPG(ctx, target)
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if !ok {
			return nil
		}
		defer tgt.Close(context.WithoutCancel(ctx))
		sid, err := readPG(ctx, src)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		tid, err := readPG(ctx, tgt)
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if same, matched, known := Match(sid, tid); known {
			if same {
				return refuse(matched)
			}
			return nil
		}
		same, matched, err := probePG(ctx, src, tgt, sid, tid)
		if err != nil {
			return fmt.Errorf("comparing the servers (%s, %s): %w", sid.Unknown, tid.Unknown, err)
		}
		if same {
			return refuse(matched)
		}
		return nil
	case "mysql":
		sid, ok, err := Read(ctx, engineName, source)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if !ok {
			return fmt.Errorf("source: database %q does not exist on %s:%d", source.Database, source.Host, source.Port)
		}
		tid, ok, err := Read(ctx, engineName, target)
		if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if !ok {
			return nil
		}
		if same, matched, _ := Match(sid, tid); same {
			return refuse(matched)
		}
		return nil
	}
	return fmt.Errorf("unknown engine %q", engineName)
}

// CheckRecorded refuses (a *SameError) when target is the database whose
// identity a backup or export recorded (recorded describes where it was
// taken, for the message). checked is false when the target could not be
// compared (no identity recorded, or a server that did not identify
// itself); the caller logs why (reason).
func CheckRecorded(ctx context.Context, engineName, action string, recorded *ID, target engine.Conn) (checked bool, reason string, err error) {
	if recorded == nil {
		return false, "the artifact records no source identity (written by an older agent)", nil
	}
	if recorded.Server == "" {
		return false, "the artifact's source server did not identify itself at backup time (" + recorded.Unknown + ")", nil
	}
	tid, exists, err := Read(ctx, engineName, target)
	if err != nil {
		return false, "", fmt.Errorf("target: %w", err)
	}
	if !exists {
		return true, "", nil
	}
	same, matched, known := Match(*recorded, tid)
	if !known {
		return false, "the target server did not identify itself (" + tid.Unknown + ")", nil
	}
	if same {
		return true, "", &SameError{Action: action, Source: "the artifact was taken from, " + recorded.String(), Target: Address(target), Matched: matched}
	}
	return true, "", nil
}

// connectPG connects to c's database; exists is false when the server
// says it does not exist (SQLSTATE 3D000).
func connectPG(ctx context.Context, c engine.Conn) (*pgx.Conn, bool, error) {
	conn, err := inventory.ConnectPostgres(ctx, c, c.Database)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "3D000" || strings.Contains(err.Error(), "(SQLSTATE 3D000)") {
			return nil, false, nil
		}
		return nil, false, err
	}
	return conn, true, nil
}

func readPG(ctx context.Context, conn *pgx.Conn) (ID, error) {
	id := ID{Engine: "postgres"}
	var oid int64
	if err := conn.QueryRow(ctx, "SELECT current_database(), oid::int8 FROM pg_database WHERE datname = current_database()").Scan(&id.Database, &oid); err != nil {
		return id, fmt.Errorf("reading the database's oid: %w", err)
	}
	id.OID = uint32(oid)
	var sysid int64
	// Outside a transaction: a denied call fails only this query.
	err := conn.QueryRow(ctx, "SELECT system_identifier FROM pg_control_system()").Scan(&sysid)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		id.Server = fmt.Sprintf("system_identifier=%d", sysid)
	case errors.As(err, &pe) && pe.Code == "42501":
		id.Unknown = "pg_control_system() is not executable by this user"
	default:
		return id, fmt.Errorf("reading the server's system_identifier: %w", err)
	}
	return id, nil
}

// probePG finds whether tgt's server runs src's session: src sets a
// random application_name, tgt looks for that backend.
func probePG(ctx context.Context, src, tgt *pgx.Conn, sid, tid ID) (bool, string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return false, "", err
	}
	token := "cairn-identity-" + hex.EncodeToString(b)
	var pid int32
	if err := src.QueryRow(ctx, "SELECT pg_backend_pid(), set_config('application_name', $1, false)", token).Scan(&pid, new(string)); err != nil {
		return false, "", fmt.Errorf("source: %w", err)
	}
	var datid int64
	err := tgt.QueryRow(ctx, "SELECT datid::int8 FROM pg_stat_activity WHERE pid = $1 AND application_name = $2", pid, token).Scan(&datid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("target: %w", err)
	}
	if uint32(datid) == tid.OID || sid.Database == tid.Database {
		return true, fmt.Sprintf("the target server runs the source's session (backend pid %d) in the same database, oid %d", pid, datid), nil
	}
	return false, "", nil
}

func readMySQL(ctx context.Context, conn *sql.Conn, database string) (ID, bool, error) {
	id := ID{Engine: "mysql"}
	var lower int
	if err := conn.QueryRowContext(ctx, "SELECT @@lower_case_table_names").Scan(&lower); err != nil {
		return id, false, fmt.Errorf("reading lower_case_table_names: %w", err)
	}
	id.FoldCase = lower != 0
	q := "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
	if id.FoldCase {
		q = "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE LOWER(SCHEMA_NAME) = LOWER(?)"
	}
	err := conn.QueryRowContext(ctx, q, database).Scan(&id.Database)
	if errors.Is(err, sql.ErrNoRows) {
		return ID{}, false, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("looking up database %q: %w", database, err)
	}
	var uuid sql.NullString
	// MariaDB has no server_uuid: the query fails (unknown system variable).
	if err := conn.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&uuid); err == nil && uuid.Valid && uuid.String != "" {
		id.Server = "server_uuid=" + uuid.String
		return id, true, nil
	}
	var host, datadir string
	var port int
	if err := conn.QueryRowContext(ctx, "SELECT @@hostname, @@port, @@datadir").Scan(&host, &port, &datadir); err != nil {
		return id, false, fmt.Errorf("reading @@hostname, @@port, @@datadir: %w", err)
	}
	id.Server = fmt.Sprintf("hostname=%s port=%d datadir=%s", host, port, datadir)
	return id, true, nil
}
