// Package agekeys checks age X25519 keys (age-encryption.org) the way the
// agent will parse them, so a recipient or identity that is not one stops
// an object before any Job runs — at admission when the value is in the
// spec, in the controller when it is in a Secret or ConfigMap — instead of
// failing the first run.
//
// A recipient is "age1" followed by the bech32 encoding (BIP 173, without
// its 90-character limit, as age uses it) of a 32-byte X25519 public key
// under the human-readable part "age"; an identity is the upper-case
// bech32 encoding of a 32-byte private key under "AGE-SECRET-KEY-". The
// texts hold one key per line; blank lines and lines starting with "#"
// are ignored, as the agent does (agent/internal/crypt). Messages never
// contain key material (a private key may be pasted where a public key
// belongs).
package agekeys

import (
	"errors"
	"fmt"
	"strings"
)

const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

func polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		b := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (b>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

// decode is bech32 decoding: the human-readable part (lower case) and the
// data as bytes.
func decode(s string) (string, []byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return "", nil, errors.New("mixed case")
	}
	s = strings.ToLower(s)
	pos := strings.LastIndexByte(s, '1')
	if pos < 1 || pos+7 > len(s) {
		return "", nil, errors.New("no separator or checksum")
	}
	hrp := s[:pos]
	values := make([]byte, 0, len(hrp)*2+1+len(s)-pos-1)
	for i := range len(hrp) {
		if hrp[i] < 33 || hrp[i] > 126 {
			return "", nil, errors.New("invalid character")
		}
		values = append(values, hrp[i]>>5)
	}
	values = append(values, 0)
	for i := range len(hrp) {
		values = append(values, hrp[i]&31)
	}
	data := make([]byte, 0, len(s)-pos-1)
	for _, c := range s[pos+1:] {
		d := strings.IndexRune(charset, c)
		if d < 0 {
			return "", nil, errors.New("invalid character")
		}
		data = append(data, byte(d))
	}
	if polymod(append(values, data...)) != 1 {
		return "", nil, errors.New("bad checksum")
	}
	data = data[:len(data)-6]
	// 5-bit groups to bytes, no padding allowed beyond 4 zero bits.
	var acc uint32
	var bits uint
	out := make([]byte, 0, len(data)*5/8)
	for _, v := range data {
		acc = acc<<5 | uint32(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return "", nil, errors.New("bad padding")
	}
	return hrp, out, nil
}

// lines are the keys of text with their 1-based line numbers.
func lines(text string) (keys []string, at []int) {
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys, at = append(keys, line), append(at, n+1)
	}
	return keys, at
}

// CheckRecipients returns nil when text holds at least one age X25519
// public key and nothing else, else an error naming the first bad line
// ("line 2: ...") or saying there is none.
func CheckRecipients(text string) error {
	keys, at := lines(text)
	if len(keys) == 0 {
		return errors.New("no recipients: give at least one age public key (age1…)")
	}
	for i, k := range keys {
		if strings.HasPrefix(strings.ToUpper(k), "AGE-SECRET-KEY-") {
			return fmt.Errorf("line %d (key %d) is a private key (AGE-SECRET-KEY-…), not a public key: give only public keys (age-keygen -y key.txt prints one)", at[i], i+1)
		}
		hrp, b, err := decode(k)
		if err == nil && (hrp != "age" || len(b) != 32 || strings.ToLower(k) != k) {
			err = errors.New("not an X25519 recipient")
		}
		if err != nil {
			return fmt.Errorf("line %d (key %d) is not an age X25519 public key (age1…, as age-keygen prints it): %v", at[i], i+1, err)
		}
	}
	return nil
}

// CheckIdentities returns nil when text holds at least one age X25519
// private key and nothing else, else an error naming the first bad line,
// never its content.
func CheckIdentities(text string) error {
	keys, at := lines(text)
	if len(keys) == 0 {
		return errors.New("no identity: give at least one age private key (AGE-SECRET-KEY-1…)")
	}
	for i, k := range keys {
		hrp, b, err := decode(k)
		if err != nil || hrp != "age-secret-key-" || len(b) != 32 || strings.ToUpper(k) != k {
			return fmt.Errorf("line %d (key %d) is not an age X25519 private key (AGE-SECRET-KEY-1…, as age-keygen writes it)", at[i], i+1)
		}
	}
	return nil
}
