package parts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/inventory"
	"cairn.dev/agent/internal/pipeline"
	"cairn.dev/agent/internal/store"
)

// PGRestore loads a verified PostgreSQL multi-part artifact into pg. The
// schema part (and, over an existing database, the post part) is read
// whole and checked (into a file under a temporary directory) before the
// target is touched.
//
// fresh (the restore created the target, and it is empty): the schema's
// pre-data section in one transaction; then, n at once, the data parts —
// each streamed from the store into its own transaction, committed only
// after its last byte matched its checksum (a large table's emptied first
// by TRUNCATE, as pg_restore --jobs does) — and, as soon as a part is in,
// the post-data entries that wait only for its tables (pgsched.go); the
// foreign keys and the rest last, with pg_restore --jobs=n. A failure
// leaves some of it committed: the caller drops the database it created
// (all or nothing, for the database).
//
// Otherwise (restoring over an existing database, as a single-file
// artifact does): everything in one psql transaction, one part after the
// other, committed only at the end: the foreign keys of the tables the
// archive replaces dropped first (--clean drops tables in its own order,
// and a foreign key from a table dropped later would stop it), then each
// part's SQL (pg_restore --file=-; the schema's pre-data section with
// --clean --if-exists). A failure rolls everything back.
func PGRestore(ctx context.Context, st store.Store, dir string, x *Index, ids *crypt.Identities, pg *engine.Postgres, n int, fresh bool, log *slog.Logger) error {
	if len(x.Schema()) != 1 || len(x.Post()) != 1 || len(x.Indexes()) != 0 {
		return fmt.Errorf("%w: a PostgreSQL parts index has one schema part, data parts and one post part", pipeline.ErrCorrupted)
	}
	tmp, err := os.MkdirTemp("", "cairn-parts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fetch := func(p Part) (string, error) {
		file := filepath.Join(tmp, p.Name)
		f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return "", err
		}
		err = pipeline.Restore(ctx, st, path.Join(dir, p.Name), p.Size, p.Checksum, ids, toFile{Engine: pg, f: f})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return file, err
	}
	schema, err := fetch(x.Schema()[0])
	if err != nil {
		return fmt.Errorf("schema part: %w", err)
	}
	data := x.Data()
	if fresh {
		// A scratch database an earlier attempt created is the restore's
		// own too, but not empty.
		rels, err := pgRelations(ctx, pg)
		if err != nil {
			return err
		}
		if rels > 0 {
			log.Info("the database is not empty: restoring in one transaction", "relations", rels)
			fresh = false
		}
	}
	part := func(ctx context.Context, p Part, e engine.Engine) error {
		if err := pipeline.Restore(ctx, st, path.Join(dir, p.Name), p.Size, p.Checksum, ids, e); err != nil {
			return fmt.Errorf("data part %s (%s): %w", p.Name, cmp.Or(p.Table, "the other tables"), err)
		}
		return nil
	}
	if fresh {
		log.Info("restoring parts into the new database", "dataParts", len(data), "parallelism", n)
		start := time.Now()
		f, err := os.Open(schema)
		if err != nil {
			return err
		}
		err = pg.RestoreArgs(ctx, f, "--section=pre-data")
		f.Close()
		if err != nil {
			return fmt.Errorf("schema part: %w", err)
		}
		log.Info("schema restored", "seconds", since(start))
		toc, err := readTOC(schema)
		if err != nil {
			return fmt.Errorf("schema part's table of contents: %w", err)
		}
		groups, last := pgPostPlan(toc, data)
		if log.Enabled(ctx, slog.LevelDebug) {
			for _, g := range groups {
				log.Debug("post-data entries built once their rows are in", "tables", partsNamed(data, g.waits), "entries", tocNames(toc, g.ids))
			}
			log.Debug("post-data entries built last", "entries", tocNames(toc, last))
		}
		start = time.Now()
		var built atomic.Int64
		// A large table's part empties its table in its own transaction
		// first (it is new and empty): PostgreSQL then loads the rows
		// into a file of that transaction, as pg_restore --jobs does
		// (measured 10-25 % faster loads).
		own := map[string]inventory.Table{}
		for _, e := range toc.Entries {
			if e.Desc == "TABLE" {
				own[pgTable(e.Schema, e.Tag)] = inventory.Table{Schema: e.Schema, Name: e.Tag}
			}
		}
		left, err := schedule(ctx, n, data, groups, func(ctx context.Context, p Part) error {
			if t, ok := own[p.Table]; ok {
				return part(ctx, p, pgCopyData{Postgres: pg, table: t, log: log})
			}
			return part(ctx, p, pgData{pg})
		}, func(ctx context.Context, g *postGroup) error {
			list, err := writeList(tmp, fmt.Sprintf("group-%d.list", built.Add(1)), g.ids)
			if err != nil {
				return err
			}
			if err := pg.RestoreFile(ctx, schema, 1, "--use-list="+list); err != nil {
				return fmt.Errorf("indexes and constraints of %s: %w", partsNamed(data, g.waits), err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		log.Info("data parts committed, their tables' indexes built alongside", "parts", len(data), "groups", len(groups), "seconds", since(start))
		for _, g := range left {
			last = append(last, g.ids...)
		}
		if len(last) > 0 {
			start = time.Now()
			order := map[int64]int{}
			for i, e := range toc.Entries {
				order[e.ID] = i
			}
			slices.SortFunc(last, func(a, b int64) int { return cmp.Compare(order[a], order[b]) })
			list, err := writeList(tmp, "last.list", last)
			if err != nil {
				return err
			}
			if err := pg.RestoreFile(ctx, schema, n, "--use-list="+list); err != nil {
				return fmt.Errorf("foreign keys and the other post-data objects: %w", err)
			}
			log.Info("foreign keys and the rest built", "entries", len(last), "seconds", since(start))
		}
		return nil
	}

	log.Info("restoring parts into the existing database in one transaction", "dataParts", len(data))
	post, err := fetch(x.Post()[0])
	if err != nil {
		return fmt.Errorf("post part: %w", err)
	}
	fks, err := pgForeignKeys(ctx, pg, schema)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	ran := make(chan error, 1)
	go func() {
		err := pg.RunScript(ctx, pr)
		// psql stopped reading: the writes below fail instead of waiting.
		pr.CloseWithError(cmp.Or(err, errors.New("psql ended before its input")))
		ran <- err
	}()
	err = func() error {
		if _, err := io.WriteString(pw, fks); err != nil {
			return err
		}
		f, err := os.Open(schema)
		if err != nil {
			return err
		}
		err = pg.Script(ctx, f, pw, "--clean", "--if-exists", "--section=pre-data")
		f.Close()
		if err != nil {
			return fmt.Errorf("schema part: %w", err)
		}
		for _, p := range data {
			if err := part(ctx, p, pgScript{Postgres: pg, w: pw}); err != nil {
				return err
			}
		}
		if f, err = os.Open(post); err != nil {
			return err
		}
		defer f.Close()
		if err := pg.Script(ctx, f, pw); err != nil {
			return fmt.Errorf("post part: %w", err)
		}
		return nil
	}()
	if err != nil {
		// psql is killed before its input ends: nothing commits.
		pw.CloseWithError(err)
		rerr := <-ran
		var se *engine.StreamError
		if rerr != nil && !errors.As(rerr, &se) {
			// psql failed first (the database refused a statement); the
			// writes then failed.
			err = rerr
		}
		return fmt.Errorf("restoring into the existing database in one transaction (rolled back): %w", err)
	}
	pw.Close()
	if err := <-ran; err != nil {
		return fmt.Errorf("restoring into the existing database in one transaction (rolled back): %w", err)
	}
	return nil
}

// pgTable names a table in a part (Part.Table) and in the TOC's terms
// alike: quoted, so that no two tables share a name ("a"."b.c" is not
// "a.b"."c").
func pgTable(schema, name string) string {
	return inventory.QualifiedName(inventory.Table{Schema: schema, Name: name})
}

// readTOC reads the archive in file.
func readTOC(file string) (inventory.ArchiveCounts, error) {
	f, err := os.Open(file)
	if err != nil {
		return inventory.ArchiveCounts{}, err
	}
	defer f.Close()
	counter := inventory.NewArchiveCounter()
	_, err = io.Copy(counter, f)
	counter.CloseWithError(err)
	return counter.Result()
}

// tocNames names entries ids of toc ("INDEX public.x").
func tocNames(toc inventory.ArchiveCounts, ids []int64) []string {
	var out []string
	for _, e := range toc.Entries {
		if slices.Contains(ids, e.ID) {
			out = append(out, e.Desc+" "+e.Schema+"."+e.Tag)
		}
	}
	return out
}

// partsNamed names the tables of data parts (for an error).
func partsNamed(data []Part, idx []int) string {
	var names []string
	for _, i := range idx {
		names = append(names, cmp.Or(data[i].Table, "the other tables"))
	}
	return strings.Join(names, ", ")
}

// pgRelations counts the relations of pg's database outside the system's
// schemas.
func pgRelations(ctx context.Context, pg *engine.Postgres) (int, error) {
	conn, err := inventory.ConnectPostgres(ctx, pg.Conn, pg.Database)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'`).Scan(&n)
	return n, err
}

// pgForeignKeys returns the SQL that drops, in the target, the foreign
// keys of the tables the schema archive in file creates (and --clean
// drops): those tables go anyway, their keys with them, but a key from a
// table --clean drops after the table it references would stop the drop.
// A key from a table the archive does not hold is left: the restore then
// fails as a single-file restore does.
func pgForeignKeys(ctx context.Context, pg *engine.Postgres, file string) (string, error) {
	toc, err := readTOC(file)
	if err != nil {
		return "", fmt.Errorf("schema part's table of contents: %w", err)
	}
	if len(toc.Tables) == 0 {
		return "", nil
	}
	schemas := make([]string, len(toc.Tables))
	names := make([]string, len(toc.Tables))
	for i, t := range toc.Tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	conn, err := inventory.ConnectPostgres(ctx, pg.Conn, pg.Database)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
SELECT n.nspname, k.relname, c.conname
FROM pg_constraint c
JOIN pg_class k ON k.oid = c.conrelid
JOIN pg_namespace n ON n.oid = k.relnamespace
JOIN unnest($1::text[], $2::text[]) AS t(s, r) ON t.s = n.nspname AND t.r = k.relname
WHERE c.contype = 'f' AND c.conparentid = 0
ORDER BY 1, 2, 3`, schemas, names)
	if err != nil {
		return "", fmt.Errorf("list the foreign keys of the tables the restore replaces: %w", err)
	}
	var b strings.Builder
	for rows.Next() {
		var s, t, c string
		if err := rows.Scan(&s, &t, &c); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "ALTER TABLE IF EXISTS ONLY %s DROP CONSTRAINT IF EXISTS %s;\n",
			pgTable(s, t), inventory.Ident(c))
	}
	return b.String(), rows.Err()
}

func since(t time.Time) float64 { return time.Since(t).Round(time.Millisecond).Seconds() }

// pgData loads a data part with its own pg_restore, one transaction.
type pgData struct{ *engine.Postgres }

func (d pgData) Restore(ctx context.Context, r io.Reader) error { return d.RestoreData(ctx, r) }

// pgTruncData loads a large table's data part that pgCopyData does not
// send itself (another encoding, other entries), in one transaction that
// first empties the table (TRUNCATE: the rows then go to a new file of the
// transaction): pg_restore --file=- of the part, after the TRUNCATE, into
// psql --single-transaction, which commits only when the script ends
// cleanly (a broken part kills pg_restore, then psql).
type pgTruncData struct {
	*engine.Postgres
	table string // quoted
}

func (d pgTruncData) Restore(ctx context.Context, r io.Reader) error {
	pr, pw := io.Pipe()
	scripted := make(chan error, 1)
	go func() {
		err := d.Script(ctx, r, pw, "--data-only")
		pw.CloseWithError(err) // an error: psql reads it and is killed
		scripted <- err
	}()
	err := d.RunScript(ctx, io.MultiReader(strings.NewReader("TRUNCATE TABLE ONLY "+d.table+";\n"), pr))
	pr.CloseWithError(errors.New("psql ended")) // pg_restore's writes fail instead of waiting
	serr := <-scripted
	if err == nil {
		err = serr
	}
	return err
}

// pgScript writes a data part's SQL into the one transaction's psql.
type pgScript struct {
	*engine.Postgres
	w io.Writer
}

func (s pgScript) Restore(ctx context.Context, r io.Reader) error {
	return s.Script(ctx, r, s.w, "--data-only")
}

// toFile "restores" a part into a file.
type toFile struct {
	engine.Engine
	f *os.File
}

func (t toFile) Restore(ctx context.Context, r io.Reader) error {
	_, err := io.CopyBuffer(t.f, r, make([]byte, 256<<10))
	return err
}
