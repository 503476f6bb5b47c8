package crypt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"

	"cairn.dev/agent/contract"
)

func TestFingerprint(t *testing.T) {
	key := "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	sum := sha256.Sum256([]byte(key))
	if got, want := Fingerprint(key), "age-fp:"+hex.EncodeToString(sum[:])[:16]; got != want {
		t.Fatalf("Fingerprint = %s, want %s", got, want)
	}
}

func TestParseRecipients(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	text := "# team\n  " + a.Recipient().String() + "  \n\n# escrow\n" + b.Recipient().String() + "\n" + a.Recipient().String() + "\n"
	r, err := ParseRecipients(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.List) != 2 || r.List[0].PublicKey != a.Recipient().String() || r.List[1].Fingerprint != Fingerprint(b.Recipient().String()) {
		t.Fatalf("recipients %+v", r.List)
	}
	for name, bad := range map[string]string{
		"empty":       "# nothing\n\n",
		"private key": a.String(),
		"garbage":     "age1notakey",
		"ssh key":     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0",
	} {
		_, err := ParseRecipients(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), a.String()) {
			t.Errorf("%s: error echoes the private key: %v", name, err)
		}
	}
}

func TestParseIdentitiesNeverEchoes(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	ids, err := ParseIdentities("# created: today\n" + a.String() + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids.Own) != 1 || ids.Own[0].PublicKey != a.Recipient().String() {
		t.Fatalf("own recipients %+v", ids.Own)
	}
	broken := a.String()[:len(a.String())-3] + "qqq"
	_, err = ParseIdentities(broken)
	if err == nil || strings.Contains(err.Error(), broken[:30]) {
		t.Fatalf("ParseIdentities(broken) = %v: want an error without the key", err)
	}
}

func TestMatch(t *testing.T) {
	team, _ := age.GenerateX25519Identity()
	escrow, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	r, _ := ParseRecipients(team.Recipient().String() + "\n" + escrow.Recipient().String())
	enc := r.Record()
	ids := func(k *age.X25519Identity) *Identities { i, _ := ParseIdentities(k.String()); return i }
	if err := Match("a", enc, ids(escrow)); err != nil {
		t.Fatalf("escrow key: %v", err)
	}
	for name, tc := range map[string]struct {
		ids  *Identities
		code string
	}{
		"missing": {nil, contract.CodeEncryptionIdentityMissing},
		"wrong":   {ids(other), contract.CodeEncryptionIdentityMismatch},
	} {
		err := Match("ns/job/a.pgdump.zst.age", enc, tc.ids)
		if got := contract.FailureCode(err); got != tc.code {
			t.Errorf("%s: code %q, want %q (%v)", name, got, tc.code, err)
		}
		var ke *KeyError
		if !errors.As(err, &ke) {
			t.Errorf("%s: not a KeyError", name)
		}
		for _, fp := range enc.Fingerprints() {
			if !strings.Contains(err.Error(), fp) {
				t.Errorf("%s: %q does not name recipient %s", name, err, fp)
			}
		}
		if strings.Contains(err.Error(), "AGE-SECRET-KEY") {
			t.Errorf("%s: error holds a private key", name)
		}
	}
}
