package parts

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/loaddata"
)

// A data part of a MySQL artifact is mysqldump's header and INSERT
// statements of one table. The server spends most of a restore parsing
// those INSERTs; LOAD DATA reads the same rows as tab-separated text at
// a fraction of that cost (measured in docs/benchmarks.md). So the
// restore converts each part's INSERTs to LOAD DATA's format while the
// part streams in (agent/internal/loaddata), and loads it over its own connection
// (the Go driver's, not the mysql client) as one transaction:
//
//	<the part's header: SET NAMES, TIME_ZONE, SQL_MODE, UNIQUE_CHECKS, ...>
//	START TRANSACTION
//	LOAD DATA LOCAL INFILE 'Reader::cairn-load-N' INTO TABLE `t` CHARACTER SET binary ... (`a`,`b`,`c`)
//	   (the rows, sent as they are converted)
//	SELECT @@warning_count
//	COMMIT, only if the server stored exactly the rows sent, without a warning
//
// CHARACTER SET binary (no conversion: the bytes mysqldump wrote in
// utf8mb4 stored as they are, a binary value as its own bytes) when every
// text column is utf8mb4 or utf8mb3; else CHARACTER SET utf8mb4 (the
// server converts) with each binary column read as hex digits and stored
// through UNHEX: `(`a`,`b`,@c2) SET `c`=UNHEX(@c2)`. The binary form
// costs the server ~20 % less CPU (docs/benchmarks.md).
//
// The LOAD ends only once the part's last byte matched its checksum (the
// converter reads the verified stream to its end); a broken or
// mismatching stream ends the upload early and the transaction is rolled
// back, never committed. LOAD DATA LOCAL never stops on a bad row (it
// cannot stop the client's upload): a duplicate key is skipped with a
// warning, a value that does not fit is cut with one. So the load is
// checked before its COMMIT; a part that fails the check is rolled back
// and loaded again with its INSERTs, which fail on such a row as they
// always did.
//
// The driver answers the server's request for a file only with the
// registered reader of this load ("Reader::..."): a hostile server asking
// for another file of the agent's (a key, a token) gets an error, which
// the mysql client with --local-infile would not give.
//
// A table whose columns LOAD DATA cannot take as the dump writes them
// (BIT, spatial types, generated or invisible columns, types this code
// does not know) and a server with local_infile off load with INSERT.

// errNotLoadable: the part cannot be loaded with LOAD DATA (a value or a
// statement the converter does not take, or the check before the COMMIT
// refused the load); nothing of it was committed, and it loads with its
// INSERTs instead.
var errNotLoadable = loaddata.ErrNotLoadable

// loadFile stands for the reader's name in a plan's statement.
const loadFile = "<rows>"

// loadPlan is how the rows of one table are loaded.
type loadPlan struct {
	stmt   string // the LOAD DATA statement
	header []byte // "INSERT INTO `t` VALUES"
	hex    []bool // binary columns: through UNHEX, or raw
	// raw: the rows are read as CHARACTER SET binary, binary values as
	// their bytes (no UNHEX)
	raw bool
	// rowByRow: the table has no index but its primary key while it loads
	// (its plain keys deferred), so the load turns InnoDB's bulk insert
	// into an empty table off (unique_checks=1; see load)
	rowByRow bool
}

// loader loads MySQL data parts with LOAD DATA (nil: every part loads with
// INSERT).
type loader struct {
	my    *engine.MySQL
	plans map[string]*loadPlan // by the dump's name of the table ("`t`")
}

// loadableTypes are the DATA_TYPEs whose values mysqldump (--hex-blob)
// writes in a form LOAD DATA reads to the same value; the bool says
// binary (hex, loaded through UNHEX).
var loadableTypes = map[string]bool{
	"tinyint": false, "smallint": false, "mediumint": false, "int": false, "integer": false, "bigint": false,
	"decimal": false, "numeric": false, "float": false, "double": false, "real": false,
	"char": false, "varchar": false, "tinytext": false, "text": false, "mediumtext": false, "longtext": false,
	"date": false, "datetime": false, "timestamp": false, "time": false, "year": false,
	"enum": false, "set": false, "json": false,
	"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true,
}

// rawCharsets are the character sets a text column may have for its
// rows to load as CHARACTER SET binary: mysqldump writes every value in
// utf8mb4 (--default-character-set), and these columns store those bytes
// as they are. A column of another set (latin1, ...) needs the server's
// conversion, so its table loads with utf8mb4 and binary values through
// UNHEX.
var rawCharsets = map[string]bool{"utf8mb4": true, "utf8mb3": true, "utf8": true, "": true}

// rawType reports whether a table with a column of DATA_TYPE t may load
// as CHARACTER SET binary: MySQL's own json type refuses a binary string (MariaDB's json is
// longtext), and enum and set are matched against their members in the
// column's character set, so a table with one of those loads with
// utf8mb4.
func rawType(t string) bool { return t != "json" && t != "enum" && t != "set" }

// planLoads plans the loads of the data parts' tables, after the schema
// part ran; nil when eng is not MySQL or its server refuses LOAD DATA
// LOCAL (local_infile off). log says which tables load with INSERT, and
// why.
func planLoads(ctx context.Context, eng engine.Engine, data []Part, log *slog.Logger) (*loader, error) {
	my, ok := eng.(*engine.MySQL)
	if !ok || len(data) == 0 {
		return nil, nil
	}
	info, err := my.LoadInfo(ctx)
	if err != nil {
		return nil, err
	}
	if !info.LocalInfile {
		log.Info("the server has local_infile off: data parts load with their INSERT statements")
		return nil, nil
	}
	l := &loader{my: my, plans: map[string]*loadPlan{}}
	seen := map[string]bool{}
	for _, p := range data {
		if seen[p.Table] {
			continue
		}
		seen[p.Table] = true
		plan, why := planLoad(p.Table, info.Tables[unquoteIdent(p.Table)])
		if plan == nil {
			log.Info("table loads with its INSERT statements", "table", p.Table, "reason", why)
			continue
		}
		plan.rowByRow = !info.Indexed[unquoteIdent(p.Table)]
		l.plans[p.Table] = plan
	}
	return l, nil
}

// planLoad plans the LOAD DATA of table (as the dump quotes it) with
// columns; nil and why when it loads with INSERT.
func planLoad(table string, cols []engine.Column) (*loadPlan, string) {
	if len(cols) == 0 {
		return nil, "its columns are not in information_schema"
	}
	var list, set []string
	p := &loadPlan{header: []byte("INSERT INTO " + table + " VALUES"), hex: make([]bool, len(cols)), raw: true}
	for _, c := range cols {
		p.raw = p.raw && rawCharsets[c.Charset] && rawType(c.Type)
	}
	for i, c := range cols {
		bin, ok := loadableTypes[c.Type]
		extra := strings.ToUpper(c.Extra)
		switch {
		case !ok:
			return nil, fmt.Sprintf("column %s is of type %s", c.Name, c.Type)
		case strings.Contains(extra, "VIRTUAL"), strings.Contains(extra, "STORED"),
			strings.Contains(extra, "PERSISTENT"), strings.Contains(extra, "INVISIBLE"):
			return nil, fmt.Sprintf("column %s is %s", c.Name, c.Extra)
		}
		name := quoteIdent(c.Name)
		p.hex[i] = bin
		if bin && !p.raw {
			v := "@c" + strconv.Itoa(i)
			list = append(list, v)
			set = append(set, name+"=UNHEX("+v+")")
		} else {
			list = append(list, name)
		}
	}
	charset := "utf8mb4"
	if p.raw {
		charset = "binary"
	}
	p.stmt = "LOAD DATA LOCAL INFILE '" + loadFile + "' INTO TABLE " + table +
		" CHARACTER SET " + charset + ` FIELDS TERMINATED BY '\t' ENCLOSED BY '' ESCAPED BY '\\' LINES STARTING BY '' TERMINATED BY '\n' (` +
		strings.Join(list, ",") + ")"
	if len(set) > 0 {
		p.stmt += " SET " + strings.Join(set, ",")
	}
	return p, ""
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// unquoteIdent undoes quoteIdent (a name the dump did not quote is
// returned as it is).
func unquoteIdent(s string) string {
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		return strings.ReplaceAll(s[1:len(s)-1], "``", "`")
	}
	return s
}

// maxPartHeader bounds the header read before a part's first INSERT.
const maxPartHeader = 1 << 20

// loadPart is the engine a data part of table restores through: LOAD
// DATA when the loader has a plan for the table and the part's statements
// are the ones planned for, else the part's INSERTs (txEngine).
type loadPart struct {
	engine.Engine
	l     *loader
	table string
}

func (lp loadPart) Restore(ctx context.Context, r io.Reader) error {
	plan := lp.l.plans[lp.table]
	if plan == nil {
		return txEngine{lp.Engine}.Restore(ctx, r)
	}
	br := bufio.NewReaderSize(r, 256<<10)
	// The part's header, up to its first INSERT (not read).
	var head []byte
	for {
		b, err := br.Peek(len(plan.header))
		if err == nil && bytes.Equal(b, plan.header) {
			break
		}
		if err == nil && bytes.HasPrefix(b, []byte("INSERT INTO ")) || len(head) > maxPartHeader {
			// Not the statement planned for: the INSERTs load it.
			return txEngine{lp.Engine}.Restore(ctx, io.MultiReader(bytes.NewReader(head), br))
		}
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		switch {
		case err == io.EOF:
			// No row: the header alone (its SETs), as before.
			return txEngine{lp.Engine}.Restore(ctx, bytes.NewReader(head))
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return err
		}
	}
	if _, err := br.Discard(len(plan.header)); err != nil {
		return err
	}
	c := loaddata.New(br, plan.header, plan.hex)
	c.Raw = plan.raw
	return lp.l.load(ctx, lp.table, head, plan, c)
}

// loads numbers the readers registered with the driver.
var loads atomic.Int64

// load runs the statements of head, then loads c's rows with LOAD DATA in
// one transaction, committed only if the server stored every row sent
// without a warning.
func (l *loader) load(ctx context.Context, table string, head []byte, plan *loadPlan, c *loaddata.Converter) error {
	cfg := inventory.MySQLConfig(l.my.Conn, l.my.Database)
	cfg.MaxAllowedPacket = 0 // the server's: any row it takes
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return errors.New(engine.Redact(err.Error(), l.my.Password))
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect to MySQL %s:%d: %s", l.my.Host, l.my.Port, engine.Redact(err.Error(), l.my.Password))
	}
	defer conn.Close()
	for _, q := range statements(head) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("the part's header (%s): %w", q, err)
		}
	}
	if plan.rowByRow {
		// The header's UNIQUE_CHECKS=0 with FOREIGN_KEY_CHECKS=0 makes
		// MariaDB (10.6+) load an empty table in its bulk mode (rows
		// buffered and sorted per index, no undo log). For rows that come
		// in primary-key order into a table with no other index that
		// sorting is pure cost: the server spent about twice the CPU
		// (docs/benchmarks.md). With no secondary index there is no
		// uniqueness to check but the primary key's, which InnoDB always
		// checks; foreign keys stay unchecked.
		if _, err := conn.ExecContext(ctx, "SET SESSION unique_checks=1"); err != nil {
			return err
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after the COMMIT: nothing
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var convErr error // read once done is closed
	go func() {
		defer close(done)
		convErr = c.Run(pw)
		pw.CloseWithError(convErr) // nil: the end of the rows
	}()
	name := "cairn-load-" + strconv.FormatInt(loads.Add(1), 10)
	mysql.RegisterReaderHandler(name, func() io.Reader { return pr })
	defer mysql.DeregisterReaderHandler(name)
	res, err := tx.ExecContext(ctx, strings.Replace(plan.stmt, loadFile, "Reader::"+name, 1))
	pr.CloseWithError(errLoadEnded) // a converter still writing stops
	if err != nil {
		// The rows failed (the driver returns their error: a broken
		// stream, a value not taken) or the server did: rolled back. The
		// converter is not waited for: it stops at its next write, or
		// when the stream it reads is closed.
		return fmt.Errorf("LOAD DATA of %s: %w", table, err)
	}
	<-done // the rows were read to their end: the converter returned
	if convErr != nil {
		return fmt.Errorf("LOAD DATA of %s: %w", table, convErr)
	}
	stored, err := res.RowsAffected()
	if err != nil {
		return err
	}
	var warnings int64
	if err := tx.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return err
	}
	if stored != c.Rows() || warnings != 0 {
		return fmt.Errorf("%w: LOAD DATA of %s stored %d of the %d rows sent, with %d warning(s)", errNotLoadable, table, stored, c.Rows(), warnings)
	}
	return tx.Commit()
}

// errLoadEnded stops a converter whose LOAD DATA ended before its rows.
var errLoadEnded = errors.New("the LOAD DATA statement ended before its rows")

// statements are the SQL statements of a part's header: its lines ending
// in ';', without the ';' (comments and blank lines left out).
func statements(head []byte) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(string(head), "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "--")) {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return out
}
