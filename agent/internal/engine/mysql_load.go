package engine

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// LoadFile is the file name a LOAD DATA LOCAL INFILE statement run by
// Load reads: the client's file descriptor 3, which Load's rows write.
const LoadFile = "/dev/fd/3"

// Load runs the mysql client (local infile allowed) on the database with
// script as its input while rows writes the file a LOAD DATA LOCAL INFILE
// statement of the script reads (LoadFile); what the client prints goes
// to out. rows failing kills the client before the file ends, so the
// statement never sees a clean end of its rows (the server rolls back what
// the connection did not commit); script reading on after rows (the
// statements that check and commit the load) is the caller's to order.
func (m *MySQL) Load(ctx context.Context, script io.Reader, rows func(io.Writer) error, out io.Writer) error {
	args := append(m.connArgs(), "--connect-timeout=15", "--binary-mode", "--batch", "--skip-column-names",
		"--local-infile=1", "--database="+m.Database)
	return runWith(ctx, m.Password, script, rows, out, m.env(), "mysql", args...)
}

// Column is a column of a table, as information_schema.COLUMNS has it.
type Column struct {
	Name string
	// Type is DATA_TYPE, lower case ("int", "varchar", "varbinary", ...).
	Type string
	// Extra is EXTRA ("auto_increment", "VIRTUAL GENERATED",
	// "INVISIBLE", ...).
	Extra string
}

// LoadInfo is what decides whether rows can be loaded with LOAD DATA
// LOCAL INFILE: whether the server allows it (local_infile), and the
// columns of each table of the database, in their order.
type LoadInfo struct {
	LocalInfile bool
	Tables      map[string][]Column
}

// LoadInfo reads the server's local_infile and the database's columns.
func (m *MySQL) LoadInfo(ctx context.Context) (*LoadInfo, error) {
	rows, err := m.batch(ctx, "", "SELECT @@local_infile;\n"+
		"SELECT TABLE_NAME, COLUMN_NAME, LOWER(DATA_TYPE), EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "+
		schemaLiteral(m.Database)+" ORDER BY TABLE_NAME, ORDINAL_POSITION;\n")
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("SELECT @@local_infile: unexpected output %q", rows)
	}
	info := &LoadInfo{LocalInfile: rows[0][0] == "1", Tables: map[string][]Column{}}
	for _, r := range rows[1:] {
		if len(r) != 4 {
			return nil, fmt.Errorf("information_schema.COLUMNS: unexpected row %q", r)
		}
		info.Tables[r[0]] = append(info.Tables[r[0]], Column{Name: r[1], Type: r[2], Extra: strings.TrimSpace(r[3])})
	}
	return info, nil
}
