package suite

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/naming"
)

// keyPair returns a new age identity: its public key and private key.
func keyPair(t *testing.T) (pub, priv string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	check(t, err)
	return id.Recipient().String(), id.String()
}

// Encryption: a backup encrypted to a team key and an escrow key stores
// bytes that do not decompress and contain none of the tables' data; the
// manifest and list name both recipients (fingerprints), never a private
// key; a restore with either identity (given in the environment or in a
// file) gives equal tables; a restore without an identity, or with another
// one, fails before the target exists (exit 2, the failure code, the
// recipients named); an artifact backed up after the recipients changed
// needs the new key, while the older one still opens with the old key.
func Encryption(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	db := "enc_" + kind
	job := naming.Job{Namespace: "shop", Name: "enc-" + kind}
	check(t, e.DB.Seed(db))
	marker := "cairn-plaintext-marker-7d1f"
	_, err := e.DB.SQL(db, "INSERT INTO customers (id, name, email) VALUES (999999, '"+marker+"', '"+marker+"@example.com')")
	check(t, err)
	t.Cleanup(func() {
		for _, d := range []string{db, db + "_team", db + "_escrow", db + "_none", db + "_wrong", db + "_rotated"} {
			e.DB.Drop(d)
		}
	})
	before := fingerprint(t, e.DB, db)
	teamPub, teamPriv := keyPair(t)
	escrowPub, escrowPriv := keyPair(t)
	_, otherPriv := keyPair(t)
	recipients := "# team\n" + teamPub + "\n# escrow\n" + escrowPub + "\n"

	res := mustSucceed(t, e.agent(t, st, db, job, []string{contract.EnvEncryptionRecipients + "=" + recipients}, "backup"))
	wantFP := []string{crypt.Fingerprint(teamPub), crypt.Fingerprint(escrowPub)}
	if strings.Join(res.EncryptedTo, ",") != strings.Join(wantFP, ",") {
		t.Errorf("result encryptedTo %v, want %v", res.EncryptedTo, wantFP)
	}
	key := st.KeyOf(t, job, res.Artifact)
	if !naming.Encrypted(path.Base(key)) {
		t.Errorf("artifact %s does not end in %s", key, naming.ExtEncrypted)
	}
	stored := st.Read(t, key)
	if int64(len(stored)) != res.Size || sha256Hex(stored) != res.Checksum {
		t.Fatalf("stored artifact has %d bytes %s; result says %d bytes %s", len(stored), sha256Hex(stored), res.Size, res.Checksum)
	}
	if bytes.HasPrefix(stored, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatal("the stored artifact starts as a zstd stream")
	}
	dec, err := zstd.NewReader(nil)
	check(t, err)
	if _, err := dec.DecodeAll(stored, nil); err == nil {
		t.Fatal("the stored artifact decodes as zstd")
	}
	dec.Close()
	for _, clear := range []string{marker, "customers", "CREATE TABLE"} {
		if bytes.Contains(stored, []byte(clear)) {
			t.Errorf("the stored artifact contains %q in clear", clear)
		}
	}
	byHand(t, e, stored, teamPriv)
	manifest := string(st.Read(t, job.ManifestKey(path.Base(key))))
	for _, want := range []string{teamPub, escrowPub, wantFP[0], wantFP[1], `"method": "age"`} {
		if !strings.Contains(manifest, want) {
			t.Errorf("manifest does not record %q:\n%s", want, manifest)
		}
	}
	for _, priv := range []string{teamPriv, escrowPriv, "AGE-SECRET-KEY"} {
		if strings.Contains(manifest, priv) {
			t.Fatal("the manifest holds a private key")
		}
	}
	lr := e.agent(t, st, db, job, nil, "list")
	if lr.Code != 0 {
		t.Fatalf("list failed: %s", lr.Stderr)
	}
	cat, err := contract.ParseCatalog(lr.TermLog)
	check(t, err)
	if len(cat.Artifacts) != 1 || strings.Join(cat.Artifacts[0].EncryptedTo, ",") != strings.Join(wantFP, ",") {
		t.Errorf("list reports %+v, want one artifact encrypted to %v", cat.Artifacts, wantFP)
	}

	// Without an identity, or with another one: refused before the target
	// exists, with the recipients named.
	none := e.agent(t, st, db+"_none", job, nil, "restore")
	reason := mustFail(t, none, wantFP[0], wantFP[1], "no identity", "not touched")
	mustExit(t, none, contract.ExitUsage)
	if code := failureCode(t, none.TermLog); code != contract.CodeEncryptionIdentityMissing {
		t.Errorf("code %q, want %q (%s)", code, contract.CodeEncryptionIdentityMissing, reason)
	}
	wrong := e.agent(t, st, db+"_wrong", job, []string{contract.EnvEncryptionIdentity + "=" + otherPriv}, "restore")
	mustFail(t, wrong, wantFP[0], wantFP[1], "cannot decrypt", "not touched")
	mustExit(t, wrong, contract.ExitUsage)
	noSecrets(t, wrong, otherPriv)
	if code := failureCode(t, wrong.TermLog); code != contract.CodeEncryptionIdentityMismatch {
		t.Errorf("code %q, want %q", code, contract.CodeEncryptionIdentityMismatch)
	}
	for _, d := range []string{db + "_none", db + "_wrong"} {
		if dbExists(t, e, d) {
			t.Fatalf("database %s exists after a restore refused for its key", d)
		}
	}

	// The team key from the environment, the escrow key from a file.
	keyFile := filepath.Join(t.TempDir(), "identity")
	check(t, os.WriteFile(keyFile, []byte("# escrow\n"+escrowPriv+"\n"), 0o600))
	for d, extra := range map[string][]string{
		db + "_team":   {contract.EnvEncryptionIdentity + "=" + teamPriv},
		db + "_escrow": {contract.EnvEncryptionIdentityFile + "=" + keyFile},
	} {
		rr := e.agent(t, st, d, job, extra, "restore")
		got := mustSucceed(t, rr)
		noSecrets(t, rr, teamPriv, escrowPriv)
		if got.Checksum != res.Checksum {
			t.Errorf("restored %s, want %s", got.Artifact, res.Artifact)
		}
		if after := fingerprint(t, e.DB, d); after != before {
			t.Fatalf("%s differs from the backed-up database.\nbefore:\n%s\nafter:\n%s", d, before, after)
		}
	}

	// Rotation: the next backup goes to a new key only; the old artifact
	// still opens with the old key, the new one only with the new key.
	newPub, newPriv := keyPair(t)
	rotated := mustSucceed(t, e.agent(t, st, db, job, []string{contract.EnvEncryptionRecipients + "=" + newPub}, "backup"))
	if strings.Join(rotated.EncryptedTo, ",") != crypt.Fingerprint(newPub) {
		t.Errorf("rotated backup encrypted to %v, want %s", rotated.EncryptedTo, crypt.Fingerprint(newPub))
	}
	old := e.agent(t, st, db+"_rotated", job, []string{contract.EnvEncryptionIdentity + "=" + teamPriv}, "restore")
	mustFail(t, old, crypt.Fingerprint(newPub), "cannot decrypt")
	mustExit(t, old, contract.ExitUsage)
	if dbExists(t, e, db+"_rotated") {
		t.Fatal("a restore refused for its key created the target")
	}
	mustSucceed(t, e.agent(t, st, db+"_rotated", job, []string{contract.EnvEncryptionIdentity + "=" + newPriv}, "restore"))
	mustSucceed(t, e.agent(t, st, db+"_rotated", job, []string{
		contract.EnvEncryptionIdentity + "=" + teamPriv, contract.EnvArtifact + "=" + path.Base(res.Artifact)}, "restore"))
	if after := fingerprint(t, e.DB, db+"_rotated"); after != before {
		t.Fatalf("the older artifact restored with the old key differs")
	}

	// A private key given as a recipient is refused without being echoed.
	r := e.agent(t, st, db, job, []string{contract.EnvEncryptionRecipients + "=" + teamPriv}, "backup")
	mustFail(t, r, "private key")
	mustExit(t, r, contract.ExitUsage)
	noSecrets(t, r, teamPriv)
}

func failureCode(t *testing.T, termLog string) string {
	t.Helper()
	_, err := contract.Parse(termLog)
	var failed *contract.FailedError
	if !asFailed(err, &failed) {
		t.Fatalf("termination message %q is not a failure", termLog)
	}
	return failed.Code
}

// byHand decrypts an artifact with the age command (Debian's package) and
// decompresses it with zstd, as docs/store.md tells a person to: the result
// is the dump, readable by the engine's tools.
func byHand(t *testing.T, e *Env, stored []byte, priv string) {
	t.Helper()
	dir := t.TempDir()
	art, keyFile := filepath.Join(dir, "artifact.zst.age"), filepath.Join(dir, "key.txt")
	check(t, os.WriteFile(art, stored, 0o600))
	check(t, os.WriteFile(keyFile, []byte(priv+"\n"), 0o600))
	for _, tool := range []string{"age", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run hack/agent-deps.sh (make agent-deps)", tool)
		}
	}
	out, err := exec.Command("sh", "-c", `age -d -i "$1" "$2" | zstd -d`, "sh", keyFile, art).Output()
	if err != nil {
		t.Fatalf("age -d | zstd -d: %v", err)
	}
	switch e.DB.Engine() {
	case "postgres":
		if !bytes.HasPrefix(out, []byte("PGDMP")) {
			t.Fatalf("decrypted by hand, the artifact is not a pg_dump archive: %q", out[:min(len(out), 16)])
		}
	default:
		if !bytes.Contains(out, []byte("CREATE TABLE")) {
			t.Fatal("decrypted by hand, the artifact is not a mysqldump script")
		}
	}
}

// MigrateViaStoreEncrypted: a Store transfer's export encrypted to a key
// (no table data in the stored bytes), imported with its identity into an
// equal target; an import with another identity fails before the target
// exists.
func MigrateViaStoreEncrypted(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	pub, priv := keyPair(t)
	_, other := keyPair(t)
	m := newMigration(t, e, "mig_enc_"+kind)
	m.env = append(m.env, st.Env...)
	targetOnly := []string{"CAIRN_DB_HOST=", "CAIRN_DB_USER=", "CAIRN_DB_PASSWORD="}
	ex := m.ok(t, "export", contract.EnvEncryptionRecipients+"="+pub)
	if !strings.HasSuffix(ex.Artifact, naming.ExtEncrypted) {
		t.Fatalf("export %s is not encrypted", ex.Artifact)
	}
	job := naming.MigrationJob("shop", "mig-enc-"+kind)
	stored := st.Read(t, st.KeyOf(t, job, ex.Artifact))
	if bytes.Contains(stored, []byte("customers")) || bytes.HasPrefix(stored, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatal("the export is readable without the key")
	}
	targetOnly = append(targetOnly, "CAIRN_ARTIFACT="+ex.Artifact)
	r := m.run(t, "import", append(slices.Clone(targetOnly), contract.EnvEncryptionIdentity+"="+other)...)
	mustExit(t, r, contract.ExitUsage)
	if failureCode(t, r.TermLog) != contract.CodeEncryptionIdentityMismatch || dbExists(t, e, m.dst) {
		t.Fatalf("import with another identity: %s (target exists: %v)", r.TermLog, dbExists(t, e, m.dst))
	}
	m.ok(t, "import", append(slices.Clone(targetOnly), contract.EnvEncryptionIdentity+"="+priv)...)
	if src, dst := fingerprint(t, e.DB, m.src), fingerprint(t, e.DB, m.dst); src != dst {
		t.Fatalf("imported target differs from source")
	}
}
