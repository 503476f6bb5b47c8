package engine

import (
	"context"
	"fmt"
	"strings"
)

// Column is a column of a table, as information_schema.COLUMNS has it.
type Column struct {
	Name string
	// Type is DATA_TYPE, lower case ("int", "varchar", "varbinary", ...).
	Type string
	// Extra is EXTRA ("auto_increment", "VIRTUAL GENERATED",
	// "INVISIBLE", ...).
	Extra string
	// Charset is CHARACTER_SET_NAME, lower case ("utf8mb4", "latin1"; ""
	// for a column without one: numbers, dates, binary types).
	Charset string
}

// LoadInfo is what decides whether rows can be loaded with LOAD DATA
// LOCAL INFILE: whether the server allows it (local_infile), and the
// columns of each table of the database, in their order.
type LoadInfo struct {
	LocalInfile bool
	Tables      map[string][]Column
	// Indexed are the tables with an index other than their primary key
	// (information_schema.STATISTICS, as the tables are now).
	Indexed map[string]bool
}

// LoadInfo reads the server's local_infile and the database's columns.
func (m *MySQL) LoadInfo(ctx context.Context) (*LoadInfo, error) {
	rows, err := m.batch(ctx, "", "SELECT @@local_infile;\n"+
		"SELECT TABLE_NAME, COLUMN_NAME, LOWER(DATA_TYPE), EXTRA, LOWER(IFNULL(CHARACTER_SET_NAME, '')) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "+
		schemaLiteral(m.Database)+" ORDER BY TABLE_NAME, ORDINAL_POSITION;\n"+
		"SELECT DISTINCT TABLE_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = "+
		schemaLiteral(m.Database)+" AND INDEX_NAME <> 'PRIMARY';\n")
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("SELECT @@local_infile: unexpected output %q", rows)
	}
	info := &LoadInfo{LocalInfile: rows[0][0] == "1", Tables: map[string][]Column{}, Indexed: map[string]bool{}}
	for _, r := range rows[1:] {
		if len(r) == 1 { // the third query's: a table with a secondary index
			info.Indexed[r[0]] = true
			continue
		}
		if len(r) != 5 {
			return nil, fmt.Errorf("information_schema.COLUMNS: unexpected row %q", r)
		}
		info.Tables[r[0]] = append(info.Tables[r[0]], Column{Name: r[1], Type: r[2], Extra: strings.TrimSpace(r[3]), Charset: r[4]})
	}
	return info, nil
}
