package suite

import (
	"bytes"
	"path"
	"strings"
	"testing"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
)

// PartsEncrypted: a multi-part backup with recipients encrypts every part
// on its own (an age stream each, no table data readable), not the index;
// the restore with an identity loads it in parallel and gives equal
// tables; without one it fails before the target exists (exit 2,
// EncryptionIdentityMissing); with another key, before the target exists
// too (exit 2, EncryptionIdentityMismatch).
func PartsEncrypted(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "partsenc_" + kind
	job := naming.Job{Namespace: "shop", Name: "partsenc-" + kind}
	t.Cleanup(func() { e.DB.Drop(db); e.DB.Drop(db + "_t") })
	pub, priv := keyPair(t)
	_, other := keyPair(t)
	res, x := partsBackup(t, e, st, db, job, 2, contract.EnvEncryptionRecipients+"="+pub)
	name := path.Base(res.Artifact)
	if !naming.Encrypted(name) || !x.Encrypted || len(res.EncryptedTo) != 1 {
		t.Fatalf("artifact %s, index encrypted %v, encryptedTo %v", name, x.Encrypted, res.EncryptedTo)
	}
	for _, p := range x.Parts {
		b := st.Read(t, job.PartKey(name, p.Name))
		if !bytes.HasPrefix(b, []byte("age-encryption.org/v1\n")) || bytes.Contains(b, []byte("INSERT INTO")) {
			t.Fatalf("part %s is not an age stream", p.Name)
		}
	}
	before, blobs := fingerprint(t, e.DB, db), blobsPrint(t, e, db)

	for _, c := range []struct {
		env  []string
		code string
	}{
		{nil, contract.CodeEncryptionIdentityMissing},
		{[]string{contract.EnvEncryptionIdentity + "=" + other}, contract.CodeEncryptionIdentityMismatch},
	} {
		r := e.agent(t, st, db+"_t", job, append(c.env, contract.EnvParallelism+"=2"), "restore")
		mustFail(t, r, "not touched")
		mustExit(t, r, contract.ExitUsage)
		if got := failureCode(t, r.TermLog); got != c.code {
			t.Errorf("code %q, want %s", got, c.code)
		}
		if out, _ := e.DB.SQL("", "SHOW DATABASES LIKE '"+db+"_t'"); strings.TrimSpace(out) != "" {
			t.Fatal("the target was created although the restore had no key")
		}
		noSecrets(t, r, priv, other)
	}
	mustSucceed(t, e.agent(t, st, db+"_t", job, []string{contract.EnvEncryptionIdentity + "=" + priv, contract.EnvParallelism + "=2"}, "restore"))
	if after := fingerprint(t, e.DB, db+"_t"); after != before || blobsPrint(t, e, db+"_t") != blobs {
		t.Fatalf("encrypted parallel restore differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
