package parts

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"cairn.dev/agent/internal/engine"
)

// A data part of a MySQL artifact is mysqldump's header and INSERT
// statements of one table. The server spends most of a restore parsing
// those INSERTs; LOAD DATA reads the same rows as tab-separated text at
// a fraction of that cost (measured in docs/benchmarks.md). So the
// restore converts each part's INSERTs to LOAD DATA's format while the
// part streams in, and loads it with LOAD DATA LOCAL INFILE over the same
// one transaction per part:
//
//	<the part's header: SET NAMES, TIME_ZONE, SQL_MODE, UNIQUE_CHECKS, ...>
//	SET autocommit=0;
//	LOAD DATA LOCAL INFILE '/dev/fd/3' INTO TABLE `t` CHARACTER SET utf8mb4 ... (`a`,`b`,@c2) SET `c`=UNHEX(@c2);
//	   (the rows, written to the client's fd 3 as they are converted)
//	SELECT ROW_COUNT(), @@warning_count INTO @cairn_rows, @cairn_warnings;
//	SELECT @cairn_rows, @cairn_warnings;
//	SELECT 1 FROM DUAL WHERE (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE NOT (@cairn_rows = <rows sent> AND @cairn_warnings = 0)) = 1;
//	COMMIT;
//
// The lines after the LOAD are written only once the part's last byte
// matched its checksum and every row was converted; until then the client
// waits for them, so nothing commits early. A broken or mismatching stream
// kills the client before its rows end (the server rolls the part back).
// LOAD DATA LOCAL never stops on a bad row (it cannot stop the client's
// upload): a duplicate key is skipped with a warning, a value that does
// not fit is cut with one. So the load is checked before its COMMIT:
// exactly the rows sent were stored, without a single warning; otherwise
// the subquery fails with more than one row, the client stops before the
// COMMIT, and the part is rolled back and then loaded again with its
// INSERTs, which fail on such a row as they always did.
//
// A table whose columns LOAD DATA cannot take as the dump writes them
// (BIT, spatial types, generated or invisible columns, types this code
// does not know) and a server with local_infile off load with INSERT.

// errNotLoadable: the part cannot be loaded with LOAD DATA (a value or a
// statement the converter does not take, or the check before the COMMIT
// refused the load); nothing of it was committed, and it loads with its
// INSERTs instead.
var errNotLoadable = errors.New("not loadable with LOAD DATA")

// loadPlan is how the rows of one table are loaded.
type loadPlan struct {
	stmt   string // the LOAD DATA statement
	header []byte // "INSERT INTO `t` VALUES"
	hex    []bool // columns loaded through UNHEX (binary types)
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
	p := &loadPlan{header: []byte("INSERT INTO " + table + " VALUES"), hex: make([]bool, len(cols))}
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
		if bin {
			v := "@c" + strconv.Itoa(i)
			list = append(list, v)
			set = append(set, name+"=UNHEX("+v+")")
			p.hex[i] = true
		} else {
			list = append(list, name)
		}
	}
	p.stmt = "LOAD DATA LOCAL INFILE '" + engine.LoadFile + "' INTO TABLE " + table +
		` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\t' ENCLOSED BY '' ESCAPED BY '\\' LINES STARTING BY '' TERMINATED BY '\n' (` +
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
	c := &converter{r: br, plan: plan}
	done := make(chan struct{})
	var out bytes.Buffer
	script := io.MultiReader(
		strings.NewReader(string(head)+"\nSET autocommit=0;\n"+plan.stmt+";\n"),
		&afterRows{done: done, c: c})
	err := lp.l.my.Load(ctx, script, func(w io.Writer) error {
		defer close(done)
		c.err = c.run(w)
		return c.err
	}, &out)
	if err == nil || c.err != nil {
		return err
	}
	// The client stopped at the check: what the server stored differed
	// from the rows sent (nothing was committed).
	if got := strings.Fields(out.String()); len(got) == 2 && (got[0] != strconv.FormatInt(c.rows, 10) || got[1] != "0") {
		return fmt.Errorf("%w: LOAD DATA of %s stored %s of the %d rows sent, with %s warning(s)", errNotLoadable, lp.table, got[0], c.rows, got[1])
	}
	return err
}

// afterRows is the end of a load's script: once the rows are all
// converted and written, the check of what the server stored and the
// COMMIT; the converter's error if it failed (the client is killed).
type afterRows struct {
	done <-chan struct{}
	c    *converter
	rest *strings.Reader
}

func (a *afterRows) Read(b []byte) (int, error) {
	if a.rest == nil {
		<-a.done
		if a.c.err != nil {
			return 0, a.c.err
		}
		n := strconv.FormatInt(a.c.rows, 10)
		a.rest = strings.NewReader("SELECT ROW_COUNT(), @@warning_count INTO @cairn_rows, @cairn_warnings;\n" +
			"SELECT @cairn_rows, @cairn_warnings;\n" +
			"SELECT 1 FROM DUAL WHERE (SELECT 1 UNION ALL SELECT 2 FROM DUAL WHERE NOT (@cairn_rows = " + n + " AND @cairn_warnings = 0)) = 1;\n" +
			"COMMIT;\n")
	}
	return a.rest.Read(b)
}
