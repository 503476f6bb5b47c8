package main

import (
	"fmt"
	"os"
	"sync"

	"filippo.io/age"
)

// encrypt: every agent backup case gets an encrypted twin (age to two
// recipients, a team key and an escrow key, as a user would configure),
// measured in the same interleaved runs, whose peer is the same backup
// unencrypted: the ratio column is encryption's overhead.
var encrypt bool

type encryption struct {
	suffix string
	env    []string
}

// peer is what a case with this encryption is compared with: the
// configuration's own peer unencrypted, the same backup unencrypted
// encrypted.
func (e encryption) peer(unencryptedPeer, plain string) string {
	if e.suffix == "" {
		return unencryptedPeer
	}
	return plain
}

var (
	recipientsOnce sync.Once
	recipients     string
)

// encryptions are the encodings measured: unencrypted, and (with
// -encryption) age to two fresh recipients.
func encryptions() []encryption {
	out := []encryption{{}}
	if !encrypt {
		return out
	}
	recipientsOnce.Do(func() {
		for range 2 {
			id, err := age.GenerateX25519Identity()
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: age key:", err)
				os.Exit(1)
			}
			recipients += id.Recipient().String() + "\n"
		}
	})
	return append(out, encryption{suffix: ", age", env: []string{"CAIRN_ENCRYPTION_RECIPIENTS=" + recipients}})
}
