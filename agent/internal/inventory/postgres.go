package inventory

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/patterns"
)

// Postgres is a connection to a PostgreSQL database.
type Postgres struct {
	Conn engine.Conn
	C    *pgx.Conn
}

// ConnectPostgres opens a pgx connection to database db of c. The
// coordinates go into the configuration as quoted conninfo values (and the
// password as a field), never as a connection string of their own. A
// server that asks for the password in clear is refused before it is sent
// (engine.NoCleartextPassword).
func ConnectPostgres(ctx context.Context, c engine.Conn, db string) (*pgx.Conn, error) {
	port := c.Port
	if port == 0 {
		port = 5432
	}
	cfg, err := pgx.ParseConfig("host=" + engine.QuoteConninfo(c.Host) + " port=" + strconv.Itoa(port) +
		" user=" + engine.QuoteConninfo(c.User) + " dbname=" + engine.QuoteConninfo(db) +
		" connect_timeout=15 application_name=cairn-agent " + engine.NoCleartextPassword)
	if err != nil {
		return nil, fmt.Errorf("connection settings for %s:%d: %v", c.Host, port, redact(err, c.Password))
	}
	cfg.Password = c.Password
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 15 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL %s:%d database %q as %q: %v", c.Host, port, db, c.User, redact(err, c.Password))
	}
	return conn, nil
}

func redact(err error, secret string) string { return engine.Redact(err.Error(), secret) }

// OpenPostgres connects to c's database.
func OpenPostgres(ctx context.Context, c engine.Conn) (*Postgres, error) {
	conn, err := ConnectPostgres(ctx, c, c.Database)
	if err != nil {
		return nil, err
	}
	return &Postgres{Conn: c, C: conn}, nil
}

func (p *Postgres) Engine() string { return "postgres" }
func (p *Postgres) Close() error   { return p.C.Close(context.Background()) }

func (p *Postgres) Version(ctx context.Context) (string, error) {
	var v string
	err := p.C.QueryRow(ctx, "SHOW server_version").Scan(&v)
	return v, err
}

// SystemSchemasSQL excludes the catalogs, TOAST and temporary schemas.
const pgUserTables = `
SELECT n.nspname, c.relname, pg_total_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
ORDER BY 1, 2`

// Tables lists the ordinary tables (and partitions) outside the system
// schemas and extensions that f selects.
func (p *Postgres) Tables(ctx context.Context, f *patterns.Filter, _ string) ([]Table, error) {
	return pgTables(ctx, p.C, f)
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func pgTables(ctx context.Context, q querier, f *patterns.Filter) ([]Table, error) {
	rows, err := q.Query(ctx, pgUserTables)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	var out []Table
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name, &t.Bytes); err != nil {
			rows.Close()
			return nil, err
		}
		if f.Match(t.Schema, t.Name) {
			out = append(out, t)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	sortTables(out)
	return out, nil
}

// OutputSettings fix how values print, so that a row's text is the same on
// every server and session.
var OutputSettings = []string{
	"SET TimeZone = 'UTC'",
	"SET DateStyle = 'ISO, YMD'",
	"SET IntervalStyle = 'postgres'",
	"SET extra_float_digits = 3",
	"SET bytea_output = 'hex'",
	"SET lc_monetary = 'C'",
}

// Ident quotes a PostgreSQL identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// QualifiedName is "schema"."table", quoted.
func QualifiedName(t Table) string { return Ident(t.Schema) + "." + Ident(t.Name) }

// ExportSnapshot begins a REPEATABLE READ transaction on conn and exports
// its snapshot; the snapshot lives as long as that transaction.
func ExportSnapshot(ctx context.Context, conn *pgx.Conn) (pgx.Tx, string, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, "", fmt.Errorf("begin snapshot transaction: %w", err)
	}
	var id string
	if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&id); err != nil {
		tx.Rollback(context.Background())
		return nil, "", fmt.Errorf("export snapshot: %w", err)
	}
	return tx, id, nil
}

// BeginInSnapshot begins a REPEATABLE READ READ ONLY transaction on conn
// that sees the exported snapshot id.
func BeginInSnapshot(ctx context.Context, conn *pgx.Conn, id string) (pgx.Tx, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT "+quoteLiteral(id)); err != nil {
		tx.Rollback(context.Background())
		return nil, fmt.Errorf("set transaction snapshot: %w", err)
	}
	return tx, nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Take lists the selected tables and counts (and checksums) them, all in
// one snapshot: o.Snapshot, or one exported here.
func (p *Postgres) Take(ctx context.Context, o Options) (*Inventory, error) {
	for _, s := range OutputSettings {
		if _, err := p.C.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	snap := o.Snapshot
	var tx pgx.Tx
	var err error
	if snap == "" {
		if tx, snap, err = ExportSnapshot(ctx, p.C); err != nil {
			return nil, err
		}
	} else if tx, err = BeginInSnapshot(ctx, p.C, snap); err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())

	tables, err := pgTables(ctx, tx, o.Filter)
	if err != nil {
		return nil, err
	}
	inv := &Inventory{Method: o.Method, Consistent: true, Tables: tables}
	if o.Method == MethodList || o.Method == "" {
		inv.Method = MethodList
		return inv, nil
	}
	workers := max(1, min(o.Parallel, len(tables)))
	// Worker 0 is this connection's transaction; the others join the
	// snapshot on connections of their own.
	txs := []pgx.Tx{tx}
	for i := 1; i < workers; i++ {
		c, err := ConnectPostgres(ctx, p.Conn, p.Conn.Database)
		if err != nil {
			return nil, err
		}
		defer c.Close(context.Background())
		for _, s := range OutputSettings {
			if _, err := c.Exec(ctx, s); err != nil {
				return nil, fmt.Errorf("%s: %w", s, err)
			}
		}
		wtx, err := BeginInSnapshot(ctx, c, snap)
		if err != nil {
			return nil, err
		}
		defer wtx.Rollback(context.Background())
		txs = append(txs, wtx)
	}
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[w] != nil {
					continue
				}
				errs[w] = pgCount(ctx, txs[w], &inv.Tables[i], o.Method)
			}
		}()
	}
	for i := range inv.Tables {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	lo, err := pgLargeObjects(ctx, tx, o.Method)
	if err != nil {
		return nil, err
	}
	if lo != nil {
		inv.Tables = append(inv.Tables, *lo)
		sortTables(inv.Tables)
	}
	return inv, nil
}

// LargeObjectsSchema and LargeObjectsName name the inventory's entry for
// the database's large objects (pg_largeobject): Rows is their number,
// Checksum the sum of the first 64 bits of the MD5 of each one's
// "<oid>:<contents>", Bytes their total size. The entry is there only when
// the database has large objects. They belong to no schema, so a filter
// does not select them: a migration copies them all (pg_dump -b).
const (
	LargeObjectsSchema = "pg_catalog"
	LargeObjectsName   = "pg_largeobject"
)

// LargeObjects lists the OIDs of the large objects q sees, in order.
func LargeObjects(ctx context.Context, q querier) ([]uint32, error) {
	rows, err := q.Query(ctx, "SELECT oid FROM pg_largeobject_metadata ORDER BY oid")
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	oids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	return oids, nil
}

// loChunk is how much of a large object one query reads.
const loChunk = 1 << 20

// pgLargeObjects takes the large objects' entry, nil when there are none.
// Their contents are read in chunks (lo_get) and hashed here: the server
// has no streaming MD5, and lo_get of a whole object is limited to 1 GB.
func pgLargeObjects(ctx context.Context, tx pgx.Tx, method string) (*Table, error) {
	oids, err := LargeObjects(ctx, tx)
	if err != nil || len(oids) == 0 {
		return nil, err
	}
	t := &Table{Schema: LargeObjectsSchema, Name: LargeObjectsName, Rows: int64(len(oids))}
	if method != MethodChecksum {
		return t, nil
	}
	var sum uint64
	for _, oid := range oids {
		h := md5.New()
		fmt.Fprintf(h, "%d:", oid)
		for off := int64(0); ; off += loChunk {
			var data []byte
			if err := tx.QueryRow(ctx, "SELECT lo_get($1, $2, $3)", oid, off, loChunk).Scan(&data); err != nil {
				return nil, fmt.Errorf("read large object %d: %w", oid, err)
			}
			h.Write(data)
			t.Bytes += int64(len(data))
			if len(data) < loChunk {
				break
			}
		}
		sum += binary.BigEndian.Uint64(h.Sum(nil)[:8])
	}
	t.Checksum = fmt.Sprintf("%016x", sum)
	return t, nil
}

// RowHash is the SQL expression of the hash of one row of the table
// aliased t that a checksum sums: MD5 of the row's text (OutputSettings).
const RowHash = "md5(ROW(t.*)::text)"

// rowQuerier is a connection or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Count fills t's row count (and checksum, method Checksum) in q's own
// snapshot: one statement. q must have OutputSettings.
func Count(ctx context.Context, q rowQuerier, t *Table, method string) error {
	return pgCount(ctx, q, t, method)
}

func pgCount(ctx context.Context, tx rowQuerier, t *Table, method string) error {
	name := QualifiedName(*t)
	if method == MethodRowCount {
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM ONLY "+name).Scan(&t.Rows); err != nil {
			return fmt.Errorf("count %s: %w", t.Key(), err)
		}
		return nil
	}
	var sum string
	err := tx.QueryRow(ctx, "SELECT count(*), coalesce(sum(('x' || left("+RowHash+", 16))::bit(64)::bigint), 0)::text FROM ONLY "+
		name+" AS t").Scan(&t.Rows, &sum)
	if err != nil {
		return fmt.Errorf("checksum %s: %w", t.Key(), err)
	}
	t.Checksum, err = foldSum(sum)
	return err
}

// TakeCounted is a RowCount inventory whose row counts come from the dump
// itself (ArchiveCounter: what the artifact holds) instead of a second scan
// of every table: it lists the selected tables in o.Snapshot (the dump's,
// still held by the caller) and takes each one's count from counts. A
// table counts lacks (none expected; nil counts: all) is counted with
// count(*) in the same snapshot and named in scanned.
func (p *Postgres) TakeCounted(ctx context.Context, o Options, counts map[string]int64) (inv *Inventory, scanned []string, err error) {
	if o.Snapshot == "" {
		return nil, nil, errors.New("row counts from a dump need the dump's snapshot")
	}
	tx, err := BeginInSnapshot(ctx, p.C, o.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(context.Background())
	tables, err := pgTables(ctx, tx, o.Filter)
	if err != nil {
		return nil, nil, err
	}
	inv = &Inventory{Method: MethodRowCount, Consistent: true, Tables: tables}
	for i := range inv.Tables {
		t := &inv.Tables[i]
		if n, ok := counts[t.Key()]; ok {
			t.Rows = n
			continue
		}
		if err := pgCount(ctx, tx, t, MethodRowCount); err != nil {
			return nil, nil, err
		}
		scanned = append(scanned, t.Key())
	}
	lo, err := pgLargeObjects(ctx, tx, MethodRowCount)
	if err != nil {
		return nil, nil, err
	}
	if lo != nil {
		inv.Tables = append(inv.Tables, *lo)
		sortTables(inv.Tables)
	}
	return inv, scanned, nil
}
