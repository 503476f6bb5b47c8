package suite

import (
	"bytes"
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/parts"
	"cairn.dev/agent/internal/testenv"
)

// blobPart returns the index of a data part of the blobs table in the
// middle of the artifact.
func blobPart(t *testing.T, x *parts.Index) int {
	t.Helper()
	var idx []int
	for i, p := range x.Parts {
		if p.Phase == parts.PhaseData && p.Table == "`blobs`" {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		t.Fatalf("want several data parts of blobs, have %d", len(idx))
	}
	return idx[len(idx)/2]
}

func triggers(t *testing.T, e *Env, db string) string {
	t.Helper()
	out, err := e.DB.SQL(db, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()")
	check(t, err)
	return strings.TrimSpace(out)
}

// PartsCorruptPart: a part missing or cut is refused before the target is
// touched (exit 3); a part with one byte flipped (its size unchanged)
// fails the restore when that part is read (exit 3, code
// RestoreIncomplete): the part is rolled back, the target holds whole
// parts only and no trigger (the post part never ran); so does a part of
// valid SQL whose checksum alone does not match.
func PartsCorruptPart(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "partscorrupt_" + kind
	job := naming.Job{Namespace: "shop", Name: "partscorrupt-" + kind}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	res, x := partsBackup(t, e, st, db, job, 3)
	name := path.Base(res.Artifact)
	rows := partRows(t, st, job, name, x)
	i := blobPart(t, x)
	key := job.PartKey(name, x.Parts[i].Name)
	good := st.Read(t, key)
	restore := []string{contract.EnvParallelism + "=3"}

	for _, tc := range []struct {
		what   string
		bytes  []byte // nil: deleted
		reason string
	}{
		{"missing", nil, "missing"},
		{"cut", good[:len(good)-1], "bytes"},
	} {
		if tc.bytes == nil {
			check(t, st.Open.Delete(context.Background(), key))
		} else {
			st.Write(t, key, tc.bytes)
		}
		r := e.agent(t, st, db+"_t", job, restore, "restore")
		mustFail(t, r, "corrupted", tc.reason, x.Parts[i].Name, "not touched")
		mustExit(t, r, contract.ExitCorrupted)
		if out, _ := e.DB.SQL("", "SHOW DATABASES LIKE '"+db+"_t'"); strings.TrimSpace(out) != "" {
			t.Fatalf("%s part: the target was created although the restore was refused", tc.what)
		}
	}

	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	st.Write(t, key, flipped)
	r := e.agent(t, st, db+"_t", job, restore, "restore")
	mustFail(t, r, "corrupted", x.Parts[i].Name)
	mustExit(t, r, contract.ExitCorrupted)
	if c := failureCode(t, r.TermLog); c != contract.CodeRestoreIncomplete {
		t.Errorf("code %q, want %s", c, contract.CodeRestoreIncomplete)
	}
	wholeParts(t, e, db+"_t", rows, x.Parts[i].Name)
	if n := triggers(t, e, db+"_t"); n != "0" {
		t.Errorf("%s triggers in the target of a failed restore, want none (the post part runs last)", n)
	}

	// Valid SQL of other rows, whose stored bytes only the checksum tells
	// wrong (the index has its size): every statement runs, the COMMIT
	// must not.
	st.Write(t, key, good)
	sql := partSQL(t, st, job, name, x.Parts[i])
	sql = bytes.Replace(sql, []byte(",0x"), []byte(",0x00"), 1)
	rewritePart(t, st, job, res, x, i, sql, true)
	check(t, e.DB.Drop(db+"_t"))
	r = e.agent(t, st, db+"_t", job, restore, "restore")
	mustFail(t, r, "corrupted", "checksum", x.Parts[i].Name)
	mustExit(t, r, contract.ExitCorrupted)
	wholeParts(t, e, db+"_t", rows, x.Parts[i].Name)
}

// PartsWorkerFails: one data part, valid and matching its checksum, fails
// in the database after its rows were sent (a statement the server
// refuses at its end). Its worker's transaction is rolled back and the
// others stop: exit 1, code RestoreIncomplete, and the target holds whole
// parts only, none of the failed part's rows.
func PartsWorkerFails(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "partsworker_" + kind
	job := naming.Job{Namespace: "shop", Name: "partsworker-" + kind}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	res, x := partsBackup(t, e, st, db, job, 3)
	name := path.Base(res.Artifact)
	rows := partRows(t, st, job, name, x)
	i := blobPart(t, x)
	sql := partSQL(t, st, job, name, x.Parts[i])
	rewritePart(t, st, job, res, x, i, append(sql, "INSERT INTO no_such_table VALUES (1);\n"...))

	r := e.agent(t, st, db+"_t", job, []string{contract.EnvParallelism + "=3"}, "restore")
	mustFail(t, r, "no_such_table", x.Parts[i].Name)
	mustExit(t, r, contract.ExitFailure)
	if c := failureCode(t, r.TermLog); c != contract.CodeRestoreIncomplete {
		t.Errorf("code %q, want %s", c, contract.CodeRestoreIncomplete)
	}
	wholeParts(t, e, db+"_t", rows, x.Parts[i].Name)
}

// PartsBrokenStream cuts the connections to S3 while the data parts
// stream (a proxy stops after about half of the data, then closes every
// connection): the restore fails (exit 1: a failed read may be
// transient), code RestoreIncomplete, and the target holds whole parts
// only, fewer than all.
func PartsBrokenStream(t *testing.T, e *Env) {
	st := e.NewStore(t, "s3")
	db := "partsbroken"
	job := naming.Job{Namespace: "shop", Name: "partsbroken"}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	res, x := partsBackup(t, e, st, db, job, 3)
	rows := partRows(t, st, job, path.Base(res.Artifact), x)
	var total int64
	for _, r := range rows {
		total += r.rows
	}
	var data int64
	for _, p := range x.Data() {
		data += p.Size
	}
	limit := res.Size + x.Parts[0].Size + data/2
	proxy, err := testenv.NewStallProxy(e.S3.Endpoint(), limit)
	check(t, err)
	t.Cleanup(proxy.Close)
	go func() {
		select {
		case <-proxy.Stalled():
			proxy.Close()
		case <-time.After(5 * time.Minute):
		}
	}()
	env := []string{contract.EnvParallelism + "=3", contract.EnvS3Endpoint + "=127.0.0.1:" + itoa(proxy.Port())}
	r := e.agent(t, st, db+"_t", job, env, "restore")
	mustFail(t, r)
	mustExit(t, r, contract.ExitFailure)
	if c := failureCode(t, r.TermLog); c != contract.CodeRestoreIncomplete {
		t.Errorf("code %q, want %s", c, contract.CodeRestoreIncomplete)
	}
	wholeParts(t, e, db+"_t", rows)
	if got := blobRows(t, e, db+"_t"); got >= total {
		t.Errorf("%d of %d rows restored through a stream cut at half", got, total)
	}
}
