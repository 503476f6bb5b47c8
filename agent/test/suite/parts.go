package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
)

// partsEnv makes backups write small parts: several per table.
var partsEnv = []string{contract.EnvParallelism + "=3", contract.EnvPartSizeMiB + "=1"}

// blobsPrint is the content of SeedBig's table, which Fingerprint leaves out.
func blobsPrint(t *testing.T, e *Env, db string) string {
	t.Helper()
	out, err := e.DB.SQL(db, "SELECT COUNT(*), MD5(GROUP_CONCAT(MD5(data) ORDER BY id)) FROM blobs")
	check(t, err)
	return strings.TrimSpace(out)
}

func blobRows(t *testing.T, e *Env, db string) int64 {
	t.Helper()
	out, err := e.DB.SQL(db, "SELECT COUNT(*) FROM blobs")
	check(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	check(t, err)
	return n
}

// partsBackup seeds db (the Seed tables plus ~mb MB of blobs) and backs it
// up in parts; it returns the result and the stored index.
func partsBackup(t *testing.T, e *Env, st *Store, db string, job naming.Job, mb int, extra ...string) (*contract.Result, *parts.Index) {
	t.Helper()
	check(t, e.DB.Seed(db))
	check(t, e.DB.SeedBig(db, mb))
	// A plain secondary key: deferred to an index part, built after the rows.
	_, err := e.DB.SQL(db, "ALTER TABLE customers ADD KEY customers_email (email), ADD KEY customers_born (birthday, id)")
	check(t, err)
	res := mustSucceed(t, e.agent(t, st, db, job, append(slices.Clone(partsEnv), extra...), "backup"))
	key := st.KeyOf(t, job, res.Artifact)
	if !naming.Multipart(path.Base(key)) {
		t.Fatalf("artifact %s is not a multi-part artifact", key)
	}
	stored := st.Read(t, key)
	if int64(len(stored)) != res.Size || sha256Hex(stored) != res.Checksum {
		t.Fatalf("stored index has %d bytes %s; result says %d bytes %s", len(stored), sha256Hex(stored), res.Size, res.Checksum)
	}
	x, err := parts.Decode(stored)
	check(t, err)
	if res.Parts != len(x.Parts) || res.PartsSize != x.Stored() {
		t.Errorf("result says %d parts of %d bytes, the index %d of %d", res.Parts, res.PartsSize, len(x.Parts), x.Stored())
	}
	return res, x
}

// partSQL reads a stored part and returns its SQL (decompressed).
func partSQL(t *testing.T, st *Store, job naming.Job, name string, p parts.Part) []byte {
	t.Helper()
	b := st.Read(t, job.PartKey(name, p.Name))
	if int64(len(b)) != p.Size || sha256Hex(b) != p.Checksum {
		t.Fatalf("part %s: stored %d bytes %s, the index says %d %s", p.Name, len(b), sha256Hex(b), p.Size, p.Checksum)
	}
	d, err := zstd.NewReader(bytes.NewReader(b))
	check(t, err)
	defer d.Close()
	sql, err := io.ReadAll(d)
	check(t, err)
	return sql
}

// idRange is the blobs ids a data part holds: the first and last, and how
// many (SeedBig's ids are consecutive: a part holds a range).
type idRange struct{ first, last, rows int64 }

var blobTuple = regexp.MustCompile(`\((\d+),(?:0x|NULL)`)

// partRows reads the blobs ids of each data part of that table.
func partRows(t *testing.T, st *Store, job naming.Job, name string, x *parts.Index) map[string]idRange {
	t.Helper()
	out := map[string]idRange{}
	for _, p := range x.Data() {
		if p.Table != "`blobs`" {
			continue
		}
		r := idRange{first: -1}
		for _, m := range blobTuple.FindAllSubmatch(partSQL(t, st, job, name, p), -1) {
			id, err := strconv.ParseInt(string(m[1]), 10, 64)
			check(t, err)
			if r.first < 0 {
				r.first = id
			}
			r.last = id
			r.rows++
		}
		if r.rows == 0 || r.last-r.first+1 != r.rows {
			t.Fatalf("part %s: ids %+v are not a range", p.Name, r)
		}
		out[p.Name] = r
	}
	return out
}

// wholeParts checks the documented state of a failed parallel MySQL
// restore: each data part's rows are in db all or not at all, and those
// of the parts in without are not.
func wholeParts(t *testing.T, e *Env, db string, rows map[string]idRange, without ...string) {
	t.Helper()
	var whole []string
	for n, r := range rows {
		out, err := e.DB.SQL(db, fmt.Sprintf("SELECT COUNT(*) FROM blobs WHERE id BETWEEN %d AND %d", r.first, r.last))
		check(t, err)
		got, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		check(t, err)
		switch {
		case got != 0 && got != r.rows:
			t.Errorf("part %s: %d of its %d rows restored: a part restored in part", n, got, r.rows)
		case got != 0 && slices.Contains(without, n):
			t.Errorf("part %s failed, yet its %d rows are in the target", n, got)
		case got != 0:
			whole = append(whole, n)
		}
	}
	slices.Sort(whole)
	t.Logf("whole parts in the target: %v (blobs parts: %v)", whole, rows)
}

// comLoad is how many LOAD DATA statements the server ran.
func comLoad(t *testing.T, e *Env) int {
	t.Helper()
	out, err := e.DB.SQL("", "SHOW GLOBAL STATUS LIKE 'Com_load'")
	check(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Com_load")))
	check(t, err)
	return n
}

// PartsRoundTrip backs up in parts (CAIRN_PARALLELISM 3, 1 MiB parts),
// checks the stored format (an index, and per part a zstd stream matching
// its size and checksum), that list reports the parts, and restores in
// parallel (3, every data part with LOAD DATA), one at a time (1), with
// the backup's row counts checked;
// then that a single-file artifact still restores with parallelism set,
// and that prune deletes an artifact's parts with it.
func PartsRoundTrip(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "parts_" + kind
	job := naming.Job{Namespace: "shop", Name: "parts-" + kind}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_one"); e.DB.Drop(db + "_single") })
	res, x := partsBackup(t, e, st, db, job, 3)
	name := path.Base(res.Artifact)
	before, blobs := fingerprint(t, e.DB, db), blobsPrint(t, e, db)
	rows := partRows(t, st, job, name, x)
	if len(rows) < 2 {
		t.Fatalf("the blobs table is in %d data part(s), want several: %+v", len(rows), x.Parts)
	}
	// Three dumps in one snapshot (the user has RELOAD): a schema part each.
	if n := len(x.Schema()); n != 3 || len(x.Post()) != 3 {
		t.Errorf("%d schema and %d post parts, want 3 of each (one per dump): %+v", n, len(x.Post()), x.Parts)
	}
	if len(x.Indexes()) == 0 {
		t.Errorf("no index part: the secondary keys were not deferred: %+v", x.Parts)
	}
	for _, p := range x.Parts {
		sql := partSQL(t, st, job, name, p)
		if !bytes.Contains(sql, []byte("SET NAMES")) {
			t.Errorf("part %s does not begin with the dump's preamble", p.Name)
		}
	}
	lr := e.agent(t, st, db, job, nil, "list")
	var listed contract.Result
	check(t, json.Unmarshal([]byte(strings.TrimSpace(lr.Stdout)), &listed))
	if listed.Parts != len(x.Parts) || listed.PartsSize != x.Stored() {
		t.Errorf("list shows %d parts of %d bytes, want %d of %d", listed.Parts, listed.PartsSize, len(x.Parts), x.Stored())
	}

	rowCheck := contract.EnvChecks + `=[{"name":"rows","rowCountsMatchBackup":true}]`
	check(t, e.DB.Drop(db))
	loads := comLoad(t, e)
	rr := mustSucceed(t, e.agent(t, st, db, job, []string{contract.EnvParallelism + "=3", rowCheck}, "restore"))
	// Every data part loaded with LOAD DATA (the server counts them).
	if n := comLoad(t, e) - loads; n != len(x.Data()) {
		t.Errorf("%d LOAD DATA statements ran for %d data parts", n, len(x.Data()))
	}
	if len(rr.Checks) != 1 || !rr.Checks[0].Passed {
		t.Errorf("row counts after the parallel restore: %+v", rr.Checks)
	}
	if after := fingerprint(t, e.DB, db); after != before || blobsPrint(t, e, db) != blobs {
		t.Fatalf("parallel restore differs.\nbefore:\n%s\n%s\nafter:\n%s\n%s", before, blobs, after, blobsPrint(t, e, db))
	}
	mustSucceed(t, e.agent(t, st, db+"_one", job, nil, "restore"))
	if after := fingerprint(t, e.DB, db+"_one"); after != before || blobsPrint(t, e, db+"_one") != blobs {
		t.Fatalf("restore one part at a time differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// A single-file artifact (an older agent's, or parallelism 1) restores
	// with parallelism set.
	single := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	if naming.Multipart(path.Base(single.Artifact)) || single.Parts != 0 {
		t.Fatalf("parallelism 1 wrote a multi-part artifact: %+v", single)
	}
	mustSucceed(t, e.agent(t, st, db+"_single", job, []string{contract.EnvParallelism + "=4", "CAIRN_ARTIFACT=" + single.Artifact}, "restore"))
	if after := fingerprint(t, e.DB, db+"_single"); after != before || blobsPrint(t, e, db+"_single") != blobs {
		t.Fatalf("single-file restore with parallelism 4 differs")
	}

	// Prune keeps the newest (the single file): the parts go with their index.
	pr := e.agent(t, st, db, job, []string{contract.EnvRetention + `={"keepLast":1}`}, "prune")
	if pr.Code != 0 {
		t.Fatalf("prune failed: %s", pr.Stderr)
	}
	for _, k := range st.Keys(t, job) {
		if strings.Contains(k, name) {
			t.Errorf("prune left %s of the pruned multi-part artifact", k)
		}
	}
	if c := st.Index(t, job); len(c.Entries) != 1 || c.Entries[0].Name != path.Base(single.Artifact) {
		t.Errorf("catalog after prune: %+v", c.Entries)
	}
}

// rewritePart replaces a data part's SQL, stores it compressed, and
// rewrites the index and the manifest so that every checksum matches:
// a valid artifact whose part fails in the database. With oldChecksum the
// index keeps the part's old checksum (its new size recorded): a part
// that decodes to valid SQL, whose bytes only the checksum tells wrong.
func rewritePart(t *testing.T, st *Store, job naming.Job, res *contract.Result, x *parts.Index, i int, sql []byte, oldChecksum ...bool) {
	t.Helper()
	name := path.Base(res.Artifact)
	var buf bytes.Buffer
	z, err := zstd.NewWriter(&buf)
	check(t, err)
	z.Write(sql)
	check(t, z.Close())
	p := &x.Parts[i]
	st.Write(t, job.PartKey(name, p.Name), buf.Bytes())
	p.Size = int64(buf.Len())
	if len(oldChecksum) == 0 {
		p.Checksum = sha256Hex(buf.Bytes())
	}
	idx := x.Encode()
	st.Write(t, job.Key(name), idx)
	var m catalog.Manifest
	check(t, json.Unmarshal(st.Read(t, job.ManifestKey(name)), &m))
	m.Size, m.Checksum = int64(len(idx)), sha256Hex(idx)
	b, err := catalog.EncodeManifest(job, m.Entry)
	check(t, err)
	st.Write(t, job.ManifestKey(name), b)
}
