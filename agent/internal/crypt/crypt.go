// Package crypt is the agent's client-side encryption: artifacts are
// encrypted with age (filippo.io/age) to the user's X25519 recipients
// (public keys) on the way to the store, and decrypted with the user's
// identity (private key) on the way back. The agent never holds a private
// key while backing up, never writes one anywhere, and records in the
// catalog only which recipients an artifact was encrypted to, by public
// key and fingerprint.
//
// The stream is dump → zstd → age → store, so an artifact reads by hand
// with the age and zstd tools:
//
//	age -d -i key.txt < artifact.pgdump.zst.age | zstd -d | pg_restore -d shop
package crypt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"filippo.io/age"

	"cairn.dev/agent/contract"
)

// Method is the encryption method recorded in the catalog.
const Method = "age"

// FingerprintPrefix starts every recipient fingerprint.
const FingerprintPrefix = "age-fp:"

// Recipient is one public key an artifact is encrypted to.
type Recipient struct {
	// PublicKey is the age X25519 recipient, "age1…".
	PublicKey string `json:"publicKey"`
	// Fingerprint is FingerprintPrefix and the first 16 hex digits of the
	// SHA-256 of PublicKey: `printf %s age1… | sha256sum | cut -c1-16`.
	Fingerprint string `json:"fingerprint"`
}

// Fingerprint returns the fingerprint of an age public key.
func Fingerprint(publicKey string) string {
	sum := sha256.Sum256([]byte(publicKey))
	return FingerprintPrefix + hex.EncodeToString(sum[:])[:16]
}

// Recipients are the parsed recipients of a backup.
type Recipients struct {
	List []Recipient
	age  []age.Recipient
}

// Age returns the recipients for age.Encrypt.
func (r *Recipients) Age() []age.Recipient { return r.age }

// Fingerprints returns the recipients' fingerprints, in order.
func (r *Recipients) Fingerprints() []string { return fingerprints(r.List) }

func fingerprints(rs []Recipient) []string {
	out := make([]string, len(rs))
	for i, x := range rs {
		out[i] = x.Fingerprint
	}
	return out
}

// ParseRecipients reads age X25519 public keys, one per line; blank lines
// and lines starting with "#" are ignored, surrounding spaces trimmed.
// Duplicates are dropped. A private key given by mistake is refused
// without being echoed.
func ParseRecipients(text string) (*Recipients, error) {
	out := &Recipients{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "AGE-SECRET-KEY-") {
			return nil, fmt.Errorf("recipients line %d is a private key (AGE-SECRET-KEY-…), not a public key: give the agent only public keys (age-keygen -y key.txt prints the public key); the key was not used", n+1)
		}
		r, err := age.ParseX25519Recipient(line)
		if err != nil {
			return nil, fmt.Errorf("recipients line %d: not an age X25519 public key (age1…, as age-keygen prints): %v", n+1, err)
		}
		key := r.String()
		if slices.ContainsFunc(out.List, func(x Recipient) bool { return x.PublicKey == key }) {
			continue
		}
		out.List = append(out.List, Recipient{PublicKey: key, Fingerprint: Fingerprint(key)})
		out.age = append(out.age, r)
	}
	if len(out.List) == 0 {
		return nil, errors.New("no recipients: give at least one age public key (age1…)")
	}
	return out, nil
}

// Identities are the parsed private keys of a restore.
type Identities struct {
	age []age.Identity
	// Own are the recipients of the identities (their public keys).
	Own []Recipient
}

// Age returns the identities for age.Decrypt.
func (i *Identities) Age() []age.Identity { return i.age }

// ParseIdentities reads age X25519 private keys (AGE-SECRET-KEY-1…), one
// per line, as age-keygen writes them; blank lines and "#" comments are
// ignored. Errors never contain key material.
func ParseIdentities(text string) (*Identities, error) {
	out := &Identities{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := age.ParseX25519Identity(line)
		if err != nil {
			// Never echo the line: it may be a private key.
			return nil, fmt.Errorf("identity line %d is not an age X25519 private key (AGE-SECRET-KEY-1…, as age-keygen writes it)", n+1)
		}
		pub := id.Recipient().String()
		out.age = append(out.age, id)
		out.Own = append(out.Own, Recipient{PublicKey: pub, Fingerprint: Fingerprint(pub)})
	}
	if len(out.age) == 0 {
		return nil, errors.New("no identity: give at least one age private key (AGE-SECRET-KEY-1…)")
	}
	return out, nil
}

// Encryption is what the catalog records of an encrypted artifact: never a
// private key, only the recipients it was encrypted to.
type Encryption struct {
	// Method is "age".
	Method string `json:"method"`
	// Recipients the artifact was encrypted to: any one of their
	// identities decrypts it.
	Recipients []Recipient `json:"recipients"`
}

// Record returns what the catalog records of an artifact encrypted to r.
func (r *Recipients) Record() *Encryption {
	return &Encryption{Method: Method, Recipients: slices.Clone(r.List)}
}

// Fingerprints returns the recipients' fingerprints, in order.
func (e *Encryption) Fingerprints() []string { return fingerprints(e.Recipients) }

// KeyError is a restore that cannot decrypt its artifact: no identity was
// given, or none of the given identities is a recipient. Nothing was
// written to the target. Its Code is the contract's failure code.
type KeyError struct {
	Code string
	Msg  string
}

func (e *KeyError) Error() string { return e.Msg }

// Coded returns the error as the contract's coded error.
func (e *KeyError) Coded() error { return &contract.CodedError{Code: e.Code, Err: e} }

// Match checks, before anything is read or written, that ids can decrypt
// an artifact recorded as enc: some identity's public key must be one of
// its recipients. ids may be nil (no identity configured). The error names
// the recipients the artifact needs, never a private key.
func Match(artifact string, enc *Encryption, ids *Identities) error {
	return MatchNamed("artifact "+artifact, enc, ids)
}

// MatchNamed is Match for an object described by what (e.g. "archived
// segment <path>").
func MatchNamed(what string, enc *Encryption, ids *Identities) error {
	need := describe(enc.Recipients)
	if ids == nil {
		return (&KeyError{Code: contract.CodeEncryptionIdentityMissing, Msg: fmt.Sprintf(
			"%s is encrypted to %s, and no identity was given to decrypt it (a RestoreJob's spec.encryption.identitySecretRef, or %s)",
			what, need, contract.EnvEncryptionIdentity)}).Coded()
	}
	for _, own := range ids.Own {
		for _, r := range enc.Recipients {
			if own.PublicKey == r.PublicKey {
				return nil
			}
		}
	}
	return MismatchNamed(what, enc, ids)
}

// Mismatch is the error of identities that are not among enc's recipients
// (or whose key did not open the artifact's header).
func Mismatch(artifact string, enc *Encryption, ids *Identities) error {
	return MismatchNamed("artifact "+artifact, enc, ids)
}

// MismatchNamed is Mismatch for an object described by what.
func MismatchNamed(what string, enc *Encryption, ids *Identities) error {
	return (&KeyError{Code: contract.CodeEncryptionIdentityMismatch, Msg: fmt.Sprintf(
		"%s is encrypted to %s, but the identity given is %s: it cannot decrypt it",
		what, describe(enc.Recipients), strings.Join(fingerprints(ids.Own), ", "))}).Coded()
}

func describe(rs []Recipient) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Fingerprint + " (" + r.PublicKey + ")"
	}
	s := strings.Join(parts, ", ")
	if len(rs) > 1 {
		s = "any of " + s
	}
	return s
}
