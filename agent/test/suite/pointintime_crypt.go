package suite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/pitr"
	"cairn.dev/agent/internal/testenv"
)

// PointInTimeEncrypted (both engines): with recipients, `agent archive`
// stores every segment encrypted (<file>.zst.age, its record naming the
// recipients) and the base is encrypted too: no object in the store holds
// the plaintext of an inserted marker row, while a segment decrypted by
// hand with the identity does. A restore to a second between two writes
// and to latest decrypts base and segments: the right rows. After a key
// rotation (the archiver restarted with new recipients) the older
// segments keep their key: a restore across the rotation with the old
// identity only is refused with EncryptionIdentityMismatch naming a
// segment, with both identities it succeeds. A segment changed by hand in
// the store refuses a restore across it with ArchiveGap, naming it; no
// refused restore creates its target.
func PointInTimeEncrypted(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	eng := e.DB.Engine()
	db := "pitenc_" + kind
	job := naming.Job{Namespace: "shop", Name: "pitenc-" + kind}
	dir := job.LogDir(eng)
	const marker = "cairn-pit-marker-3b9e51"
	check(t, e.DB.Create(db))
	targets := []string{"_at", "_latest", "_oldkey", "_both", "_corrupt"}
	t.Cleanup(func() {
		e.DB.Drop(db)
		for _, s := range targets {
			e.DB.Drop(db + s)
		}
		if eng == "postgres" {
			e.DB.SQL("postgres", "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '"+pitr.SlotName(job.String())+"'")
		}
	})
	sql := func(q string) {
		t.Helper()
		if _, err := e.DB.SQL(db, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows := func(database string) string {
		t.Helper()
		q := "SELECT GROUP_CONCAT(id ORDER BY id) FROM orders"
		if eng == "postgres" {
			q = "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders"
		}
		out, err := e.DB.SQL(database, q)
		check(t, err)
		return strings.TrimSpace(out)
	}
	notCreated := func(target, what string) {
		t.Helper()
		if _, err := e.DB.SQL(target, "SELECT 1"); err == nil {
			t.Errorf("%s created its target %s", what, target)
		}
	}
	sql("CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(60) NOT NULL); INSERT INTO orders VALUES (0, 'before the base')")

	pub1, priv1 := keyPair(t)
	pub2, priv2 := keyPair(t)
	arch := e.startArchiver(t, st, db, job, t.TempDir(), contract.EnvEncryptionRecipients+"="+pub1)
	t.Cleanup(func() { arch.halt(t) })
	res := mustSucceed(t, e.agent(t, st, db, job, []string{"CAIRN_POINT_IN_TIME=true", contract.EnvEncryptionRecipients + "=" + pub1}, "backup"))
	entry, ok := st.Index(t, job).Find(res.Artifact[strings.LastIndex(res.Artifact, "/")+1:])
	if !ok || entry.Encryption == nil {
		t.Fatalf("the base is not recorded encrypted: %+v", entry)
	}
	base := pitr.Base{}
	switch {
	case entry.WALBase != nil:
		base.File = entry.WALBase.File
	case entry.BinlogBase != nil:
		base = pitr.Base{File: entry.BinlogBase.File, Pos: entry.BinlogBase.Pos}
	default:
		t.Fatalf("the base records no log position: %+v", entry)
	}
	waitArchived := func(past time.Time) {
		t.Helper()
		check(t, testenv.Poll(90*time.Second, 200*time.Millisecond, func() error {
			select {
			case err := <-arch.exited:
				arch.exited <- err
				return fmt.Errorf("agent archive exited: %v\n%s", err, arch.out.String())
			default:
			}
			ix, err := pitr.LoadIndex(context.Background(), st.Open, dir)
			if err != nil {
				return err
			}
			if w := ix.WindowFrom(base); w.Latest.Before(past) {
				return fmt.Errorf("archived to %s (%s), not past %s yet", w.Latest, w.Through, past)
			}
			return nil
		}))
	}

	sql("INSERT INTO orders VALUES (1, '" + marker + "')")
	t1 := time.Now()
	waitPast(t, t1.Truncate(time.Second).Add(time.Second))
	sql("INSERT INTO orders VALUES (2, 'B')")
	between := time.Now().Truncate(time.Second).Add(time.Second)
	waitPast(t, between)
	sql("DELETE FROM orders WHERE id = 1")
	t3 := time.Now()
	waitArchived(t3.Truncate(time.Second).Add(time.Second))

	// The store: no plaintext of the marker anywhere — not in a raw
	// object, not in one that decompresses; every segment is an age file
	// whose record names the recipient; and decrypted by hand, some
	// segment holds the marker (so the check above could fail).
	ix, err := pitr.LoadIndex(context.Background(), st.Open, dir)
	check(t, err)
	for _, s := range ix.Segments {
		if s.Encryption == nil || len(s.Encryption.Recipients) != 1 || s.Encryption.Recipients[0].PublicKey != pub1 {
			t.Errorf("segment %s: record's encryption %+v, want the recipient %s", s.File, s.Encryption, pub1)
		}
	}
	id1, err := age.ParseX25519Identity(priv1)
	check(t, err)
	var objects []string
	found := false
	for _, prefix := range []string{job.Dir(), dir} {
		objs, err := st.Open.List(context.Background(), prefix)
		check(t, err)
		for _, o := range objs {
			objects = append(objects, o.Key)
			b := st.Read(t, o.Key)
			if bytes.Contains(b, []byte(marker)) {
				t.Errorf("object %s holds the marker row in plaintext", o.Key)
			}
			if bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
				t.Errorf("object %s is a readable zstd stream", o.Key)
				if dec, err := zstd.NewReader(bytes.NewReader(b)); err == nil {
					if raw, _ := io.ReadAll(dec); bytes.Contains(raw, []byte(marker)) {
						t.Errorf("object %s holds the marker row, zstd-compressed", o.Key)
					}
					dec.Close()
				}
			}
			if prefix != dir || strings.HasSuffix(o.Key, ".json") || o.Key == pitr.CoveredKey(dir) {
				continue
			}
			if !strings.HasSuffix(o.Key, ".zst.age") || !bytes.HasPrefix(b, []byte("age-encryption.org/v1")) {
				t.Errorf("segment object %s is not an age file", o.Key)
				continue
			}
			plain, err := age.Decrypt(bytes.NewReader(b), id1)
			check(t, err)
			dec, err := zstd.NewReader(plain)
			check(t, err)
			raw, err := io.ReadAll(dec)
			dec.Close()
			check(t, err)
			found = found || bytes.Contains(raw, []byte(marker))
		}
	}
	if !found {
		t.Errorf("no segment decrypted by hand holds the marker row (objects %v): the plaintext check proves nothing", objects)
	}

	withKeys := func(keys ...string) string {
		return contract.EnvEncryptionIdentity + "=" + strings.Join(keys, "\n")
	}
	restore := func(target, to string, extra ...string) testenv.Run {
		t.Helper()
		return e.agent(t, st, target, job, append([]string{"CAIRN_RECOVERY_TARGET=" + to}, extra...), "restore")
	}
	at := mustSucceed(t, restore(db+"_at", between.UTC().Format(time.RFC3339), withKeys(priv1)))
	if got := rows(db + "_at"); got != "0,1,2" {
		t.Errorf("restored to %s: ids %q, want 0,1,2", between.UTC().Format(time.RFC3339), got)
	}
	if !at.RecoveryPoint.Equal(between.UTC()) {
		t.Errorf("recovery point %s, want %s", at.RecoveryPoint, between.UTC())
	}
	mustSucceed(t, restore(db+"_latest", "latest", withKeys(priv1)))
	if got := rows(db + "_latest"); got != "0,2" {
		t.Errorf("restored to latest: ids %q, want 0,2", got)
	}

	// Key rotation: the archiver restarted with new recipients encrypts
	// the next segments to them; the older keep theirs.
	arch.halt(t)
	arch = e.startArchiver(t, st, db, job, t.TempDir(), contract.EnvEncryptionRecipients+"="+pub2)
	sql("INSERT INTO orders VALUES (3, 'C')")
	waitArchived(time.Now().Truncate(time.Second).Add(time.Second))
	ix, err = pitr.LoadIndex(context.Background(), st.Open, dir)
	check(t, err)
	if n, _ := ix.Newest(); n.Encryption == nil || n.Encryption.Recipients[0].PublicKey != pub2 {
		t.Fatalf("the newest segment after the rotation: %+v, want encrypted to the new recipient", n.Encryption)
	}
	r := restore(db+"_oldkey", "latest", withKeys(priv1))
	reason := mustFail(t, r, "archived segment", "cannot decrypt")
	if code := failureCode(t, r.TermLog); code != contract.CodeEncryptionIdentityMismatch {
		t.Errorf("restore across the rotation with the old key only: code %q, want %s (%s)", code, contract.CodeEncryptionIdentityMismatch, reason)
	}
	mustExit(t, r, contract.ExitUsage)
	noSecrets(t, r, priv1)
	notCreated(db+"_oldkey", "a restore refused for its key")
	mustSucceed(t, restore(db+"_both", "latest", withKeys(priv1, priv2)))
	if got := rows(db + "_both"); got != "0,2,3" {
		t.Errorf("restored to latest across the rotation with both keys: ids %q, want 0,2,3", got)
	}

	// A segment changed by hand in the store (its record untouched): a
	// restore across it is refused as a gap naming it, nothing written.
	var chain []string
	for _, f := range ix.Files() {
		if f > base.File {
			chain = append(chain, f)
		}
	}
	if len(chain) < 2 {
		t.Fatalf("too few segments after the base to change a middle one: %v", ix.Files())
	}
	victim := chain[len(chain)/2-1]
	key := ""
	for _, k := range pitr.SegmentKeys(dir, victim) {
		if strings.HasSuffix(k, ".zst.age") {
			key = k
		}
	}
	b := st.Read(t, key)
	b[len(b)/2] ^= 0x40
	st.Write(t, key, b)
	r = restore(db+"_corrupt", "latest", withKeys(priv1, priv2))
	reason = mustFail(t, r, victim, "unreadable")
	if code := failureCode(t, r.TermLog); code != contract.CodeArchiveGap {
		t.Errorf("restore across a changed segment: code %q, want %s (%s)", code, contract.CodeArchiveGap, reason)
	}
	notCreated(db+"_corrupt", "a restore across a changed segment")
}
