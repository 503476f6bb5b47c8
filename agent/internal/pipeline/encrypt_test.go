package pipeline

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/internal/crypt"
)

func keyPair(t testing.TB) (*crypt.Recipients, *crypt.Identities) {
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
	return r, ids
}

// An encrypted backup stores bytes that neither decompress nor contain the
// dump, restores with the identity, and with another identity fails
// before the engine reads a byte.
func TestEncryptedBackupVerifyRestore(t *testing.T) {
	for _, size := range []int{0, 1, 100 << 10, 3 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			st, dir := pvc(t)
			team, teamIDs := keyPair(t)
			escrow, escrowIDs := keyPair(t)
			both, err := crypt.ParseRecipients(team.List[0].PublicKey + "\n# escrow\n" + escrow.List[0].PublicKey + "\n")
			if err != nil {
				t.Fatal(err)
			}
			_, otherIDs := keyPair(t)
			eng := &fakeEngine{data: testData(size)}
			ctx := context.Background()
			key := "ns/job/a.pgdump.zst.age"
			w, err := Backup(ctx, eng, st, key, Encoding{Level: DefaultLevel, Recipients: both})
			if err != nil {
				t.Fatal(err)
			}
			stored, err := os.ReadFile(filepath.Join(dir, key))
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(stored)) != w.Size {
				t.Fatalf("stored %d bytes, reported %d", len(stored), w.Size)
			}
			if !bytes.HasPrefix(stored, []byte("age-encryption.org/v1\n")) {
				t.Fatalf("stored bytes do not start with an age header: %q", stored[:min(len(stored), 40)])
			}
			if dec, err := zstd.NewReader(bytes.NewReader(stored)); err == nil {
				if _, err := dec.DecodeAll(stored, nil); err == nil {
					t.Fatal("the stored bytes decode as zstd: not encrypted")
				}
				dec.Close()
			}
			if size > 64 && bytes.Contains(stored, eng.data[:64]) {
				t.Fatal("the stored bytes contain the dump in clear")
			}
			if got := files(t, dir); len(got) != 1 {
				t.Fatalf("store holds %v, want only the artifact", got)
			}
			for name, ids := range map[string]*crypt.Identities{"team": teamIDs, "escrow": escrowIDs} {
				if err := Verify(ctx, st, key, w.Size, w.Checksum, ids); err != nil {
					t.Fatalf("Verify with the %s key: %v", name, err)
				}
				target := &fakeEngine{}
				if err := Restore(ctx, st, key, w.Size, w.Checksum, ids, target); err != nil {
					t.Fatalf("Restore with the %s key: %v", name, err)
				}
				if !bytes.Equal(target.restored.Bytes(), eng.data) {
					t.Fatalf("restored %d bytes with the %s key differ from the %d dumped", target.restored.Len(), name, len(eng.data))
				}
			}
			if err := Verify(ctx, st, key, w.Size, w.Checksum, otherIDs); !errors.Is(err, ErrNoIdentityMatch) {
				t.Fatalf("Verify with another key = %v, want ErrNoIdentityMatch", err)
			}
			target := &fakeEngine{}
			if err := Restore(ctx, st, key, w.Size, w.Checksum, otherIDs, target); !errors.Is(err, ErrNoIdentityMatch) {
				t.Fatalf("Restore with another key = %v, want ErrNoIdentityMatch", err)
			}
			if target.restored.Len() != 0 {
				t.Fatalf("the engine read %d bytes of an artifact its key does not open", target.restored.Len())
			}
		})
	}
}

// A changed byte of an encrypted artifact is corruption in Verify and in
// Restore, whichever layer notices it first.
func TestEncryptedCorruption(t *testing.T) {
	st, dir := pvc(t)
	rec, ids := keyPair(t)
	ctx := context.Background()
	key := "ns/job/a.pgdump.zst.age"
	w, err := Backup(ctx, &fakeEngine{data: testData(1 << 20)}, st, key, Encoding{Level: DefaultLevel, Recipients: rec})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, key)
	good, _ := os.ReadFile(path)
	for name, mangle := range map[string]func([]byte) []byte{
		"header":    func(b []byte) []byte { b[40] ^= 1; return b },
		"payload":   func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-100] },
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, mangle(bytes.Clone(good)), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := Verify(ctx, st, key, w.Size, w.Checksum, ids); !errors.Is(err, ErrCorrupted) {
				t.Fatalf("Verify = %v, want ErrCorrupted", err)
			}
			if err := Restore(ctx, st, key, w.Size, w.Checksum, ids, &fakeEngine{}); !errors.Is(err, ErrCorrupted) {
				t.Fatalf("Restore = %v, want ErrCorrupted", err)
			}
		})
	}
}
