package config

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/store"
)

// checkPrefix refuses an S3 key prefix that is not a plain relative path:
// a ".." or "." segment (some S3-compatible servers map keys to files), a
// backslash, or a control character.
func checkPrefix(p string) error {
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("s3 prefix %q: no \".\" or \"..\" segments", p)
		}
	}
	if i := strings.IndexFunc(p, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("s3 prefix %q: no backslash or control character (byte %d)", p, i)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("s3 prefix %q is not valid UTF-8", p)
	}
	return nil
}

// checkLock validates S3 Object Lock: a mode, an S3 store, and how long.
func (c *Config) checkLock() error {
	switch c.S3.LockMode {
	case "":
		if c.LockDays != 0 {
			return &UsageError{contract.EnvS3ObjectLockDays + " is set without " + contract.EnvS3ObjectLock}
		}
		return nil
	case store.LockGovernance, store.LockCompliance:
	default:
		return &UsageError{fmt.Sprintf("S3 object lock mode %q: want GOVERNANCE or COMPLIANCE", c.S3.LockMode)}
	}
	if c.Store != "s3" {
		return &UsageError{contract.EnvS3ObjectLock + " needs an S3 store"}
	}
	if c.LockDays == 0 {
		c.LockDays = c.RetentionDays
	}
	if c.LockDays < 1 && c.Command == contract.CommandBackup {
		return &UsageError{"S3 object lock: set " + contract.EnvS3ObjectLockDays + " (how many days each artifact stays locked); it defaults to the retention days, which are not set"}
	}
	return nil
}
