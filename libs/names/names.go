// Package names builds the names of child objects from their owner's name.
// A child's name is the owner's name, cut to fit, then a suffix: the cut
// must not leave a '.' or '-' (or anything but a lowercase letter or digit)
// at the end, or the child's name ("orders.-now-…", "orders--delete-…") is
// invalid or ambiguous. Every operator cuts names with Prefix.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Prefix returns name cut to at most max bytes, without trailing bytes
// that are not lowercase ASCII letters or digits, so that Prefix(name, max)
// + "-" + suffix is a valid DNS-1123 subdomain (and label, when name is a
// label) whenever name is one. A name that fits is returned as it is (a
// valid object name already ends in a letter or digit).
//
// The cut drops the end of the name, so two names that share their first
// max bytes share their prefix: callers whose names must be unique add a
// suffix derived from the whole name (a hash), as every caller does.
func Prefix(name string, max int) string {
	if max < 0 {
		max = 0
	}
	if len(name) > max {
		name = name[:max]
	}
	for len(name) > 0 && !alnum(name[len(name)-1]) {
		name = name[:len(name)-1]
	}
	return name
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// Request names the child Job an owner starts for one request (a run-now
// or list request id): "<owner prefix>-<infix>-<hash>", at most 62 bytes,
// where hash is the first 10 hex digits of SHA-256 over namespace/owner
// and the id. The same request always gets the same name, so a repeated
// reconcile never starts a second Job for it, and a client that made the
// request can find what it started. It returns the name and the hash.
func Request(namespace, owner, infix, id string) (name, hash string) {
	sum := sha256.Sum256([]byte(namespace + "/" + owner + "\x00" + id))
	hash = hex.EncodeToString(sum[:])[:10]
	return fmt.Sprintf("%s-%s-%s", Prefix(owner, 62-len(infix)-2-10), infix, hash), hash
}
