package migrate

import (
	"context"
	"fmt"

	"cairn.dev/agent/internal/config"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
)

// selectedSourceEngine returns the source's engine with its dump
// restricted to the included objects (and to the schema in SchemaOnly
// mode), and the included tables.
func (mig *Migration) selectedSourceEngine(ctx context.Context, sc engine.Conn) (engine.Engine, []inventory.Table, error) {
	m := mig.cfg.Migrate
	eng, err := engine.New(mig.cfg.Engine, sc)
	if err != nil {
		return nil, nil, &config.UsageError{Msg: "source: " + err.Error()}
	}
	db, err := inventory.Open(ctx, mig.cfg.Engine, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	defer db.Close()
	tables, err := db.Tables(ctx, m.Filter, mig.schemaName())
	if err != nil {
		return nil, nil, fmt.Errorf("source: %w", err)
	}
	if len(tables) == 0 && !m.Filter.Empty() {
		return nil, nil, &config.UsageError{Msg: fmt.Sprintf("no table of source database %q matches include %q exclude %q", sc.Database, m.Include, m.Exclude)}
	}
	switch e := eng.(type) {
	case *engine.Postgres:
		if e.Select, err = pgSelection(ctx, db.(*inventory.Postgres), tables, m.Filter); err != nil {
			return nil, nil, err
		}
		switch {
		case m.Mode == "SchemaOnly":
			e.Select = append(e.Select, "--schema-only")
		case len(e.Select) > 0:
			// Large objects belong to no schema: pg_dump leaves them out
			// of a dump of selected schemas or tables unless asked (-b).
			// The tables' oid columns point at them, so they go too.
			e.Select = append(e.Select, "-b")
		}
	case *engine.MySQL:
		if !m.Filter.Empty() {
			for _, t := range tables {
				e.Tables = append(e.Tables, t.Name)
			}
		}
		e.NoData = m.Mode == "SchemaOnly"
	}
	return eng, tables, nil
}
