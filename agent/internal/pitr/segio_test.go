package pitr

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/store"
)

func keys(t *testing.T) (*crypt.Recipients, *crypt.Identities, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	r, err := crypt.ParseRecipients(id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := crypt.ParseIdentities(id.String())
	if err != nil {
		t.Fatal(err)
	}
	return r, ids, id.String()
}

const marker = "cairn-segment-marker-5e2a"

// stored puts a segment file holding marker (compressible, as a log is)
// into st under "arch", encrypted to r when given.
func stored(t *testing.T, st store.Store, file string, r *crypt.Recipients) Segment {
	t.Helper()
	local := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(local, bytes.Repeat([]byte(marker+" INSERT INTO orders VALUES (1, 'x');\n"), 2000), 0o600); err != nil {
		t.Fatal(err)
	}
	seg, err := put(context.Background(), st, "arch", local, Segment{File: file, Next: nextFile(file)}, r)
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

func read(t *testing.T, st store.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func write(t *testing.T, st store.Store, key string, b []byte) {
	t.Helper()
	if _, err := st.Put(context.Background(), key, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

// TestEncryptedSegments: an encrypted segment is stored as <file>.zst.age
// holding no plaintext, its record names the recipients; it reads back
// with the identity, byte for byte; without an identity or with another
// one it is a coded key error before anything is read; a byte changed, a
// cut object, or an object replaced (its record rewritten to match) is
// unreadable — ErrUnreadable and ErrGap — and never written out whole.
func TestEncryptedSegments(t *testing.T) {
	ctx := context.Background()
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, ids, _ := keys(t)
	_, other, _ := keys(t)
	seg := stored(t, st, "mysql-bin.000001", r)
	if seg.Encryption == nil || seg.Encryption.Recipients[0].PublicKey != r.List[0].PublicKey {
		t.Fatalf("the record does not name the recipient: %+v", seg.Encryption)
	}
	objs, err := st.List(ctx, "arch")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Key)
		if b := read(t, st, o.Key); bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte("INSERT INTO")) {
			t.Errorf("%s holds plaintext of the segment", o.Key)
		}
	}
	if strings.Join(names, ",") != "arch/mysql-bin.000001.json,arch/mysql-bin.000001.zst.age" {
		t.Errorf("stored objects %v, want the record and the .zst.age object", names)
	}
	stored := read(t, st, seg.objectKey("arch"))
	if !bytes.HasPrefix(stored, []byte("age-encryption.org/v1")) {
		t.Errorf("the object is no age file: %.40q", stored)
	}

	dst := filepath.Join(t.TempDir(), "out")
	if err := fetch(ctx, st, "arch", seg, dst, ids); err != nil {
		t.Fatalf("fetch with the identity: %v", err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Contains(b, []byte(marker)) || int64(len(b)) != int64(2000*len(marker+" INSERT INTO orders VALUES (1, 'x');\n")) {
		t.Errorf("fetched %d bytes, not the segment", len(b))
	}

	// Keys: checked before anything is read, coded for the operator.
	for name, tc := range map[string]struct {
		ids  *crypt.Identities
		code string
	}{"none": {nil, contract.CodeEncryptionIdentityMissing}, "another": {other, contract.CodeEncryptionIdentityMismatch}} {
		err := CheckKeys(st, "arch", []Segment{seg}, tc.ids)
		var ke *crypt.KeyError
		if !errors.As(err, &ke) || contract.FailureCode(err) != tc.code || !strings.Contains(err.Error(), "mysql-bin.000001") || !strings.Contains(err.Error(), seg.Encryption.Recipients[0].Fingerprint) {
			t.Errorf("%s identity: %v (code %q), want %s naming the segment and its recipient", name, err, contract.FailureCode(err), tc.code)
		}
		if err := fetch(ctx, st, "arch", seg, filepath.Join(t.TempDir(), "x"), tc.ids); contract.FailureCode(err) != tc.code {
			t.Errorf("fetch with %s identity: %v, want %s", name, err, tc.code)
		}
	}

	// Corruption: never a key error, never a written segment.
	unreadableAfter := func(name string, change func()) {
		t.Helper()
		change()
		dst := filepath.Join(t.TempDir(), "out")
		rec := Segment{}
		if err := json.Unmarshal(read(t, st, recordKey("arch", seg.File)), &rec); err != nil {
			t.Fatal(err)
		}
		err := fetch(ctx, st, "arch", rec, dst, ids)
		if !errors.Is(err, ErrUnreadable) || !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), seg.File) {
			t.Errorf("%s: %v, want unreadable (a gap) naming %s", name, err, seg.File)
		}
		write(t, st, seg.objectKey("arch"), stored)
		recb, _ := json.Marshal(seg)
		write(t, st, recordKey("arch", seg.File), recb)
	}
	unreadableAfter("a byte changed", func() {
		b := bytes.Clone(stored)
		b[len(b)/2] ^= 1
		write(t, st, seg.objectKey("arch"), b)
	})
	unreadableAfter("cut short", func() { write(t, st, seg.objectKey("arch"), stored[:len(stored)-100]) })
	unreadableAfter("deleted", func() { st.Delete(ctx, seg.objectKey("arch")) })
	// The store's admin rewrites the record to match changed bytes: the
	// checksum passes, the authentication of the age chunk does not.
	unreadableAfter("changed, record rewritten", func() {
		b := bytes.Clone(stored)
		b[len(b)-20] ^= 1
		write(t, st, seg.objectKey("arch"), b)
		sum := sha256.Sum256(b)
		forged := seg
		forged.Checksum = "sha256:" + hex.EncodeToString(sum[:])
		recb, _ := json.Marshal(forged)
		write(t, st, recordKey("arch", seg.File), recb)
	})
	unreadableAfter("truncated at a chunk, record rewritten", func() {
		// The final chunk's tag cut off: the checksum matches the
		// rewritten record, age refuses the stream.
		b := stored[:len(stored)-17]
		write(t, st, seg.objectKey("arch"), b)
		sum := sha256.Sum256(b)
		forged := seg
		forged.Size, forged.Checksum = int64(len(b)), "sha256:"+hex.EncodeToString(sum[:])
		recb, _ := json.Marshal(forged)
		write(t, st, recordKey("arch", seg.File), recb)
	})
}

// TestSegmentKeyRotation: segments encrypted before and after the
// recipients changed each keep theirs; a chain across the change needs
// both identities (one Secret may hold both), and names the segment the
// given one cannot open; a plain segment (archived before encryption was
// turned on) needs none.
func TestSegmentKeyRotation(t *testing.T) {
	ctx := context.Background()
	st, err := store.NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r1, _, priv1 := keys(t)
	r2, ids2, priv2 := keys(t)
	plain := stored(t, st, "mysql-bin.000001", nil)
	old := stored(t, st, "mysql-bin.000002", r1)
	cur := stored(t, st, "mysql-bin.000003", r2)
	if plain.Encryption != nil || plain.objectKey("arch") != "arch/mysql-bin.000001.zst" {
		t.Errorf("a segment without recipients: %+v at %s", plain.Encryption, plain.objectKey("arch"))
	}
	chain := []Segment{plain, old, cur}
	err = CheckKeys(st, "arch", chain, ids2)
	if contract.FailureCode(err) != contract.CodeEncryptionIdentityMismatch || !strings.Contains(err.Error(), "mysql-bin.000002") {
		t.Errorf("the new key only: %v, want a mismatch naming the older segment", err)
	}
	both, err := crypt.ParseIdentities(priv1 + "\n" + priv2)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckKeys(st, "arch", chain, both); err != nil {
		t.Fatalf("both identities: %v", err)
	}
	for _, s := range chain {
		if err := fetch(ctx, st, "arch", s, filepath.Join(t.TempDir(), s.File), both); err != nil {
			t.Errorf("fetch %s with both identities: %v", s.File, err)
		}
	}
}
