package config

import (
	"fmt"
	"regexp"
	"strings"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/crypt"
)

// Secrets returns the configured secrets, for redaction of output.
func (c *Config) Secrets() []string {
	s := []string{c.DB.Password, c.S3.SecretKey, c.S3.SessionToken}
	if c.Migrate != nil {
		s = append(s, c.Migrate.Target.Password)
	}
	for _, line := range strings.Split(c.identityText, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			s = append(s, line)
		}
	}
	return s
}

var secretArg = regexp.MustCompile(`(?i)^--?(db-)?(password|passwd|pwd|pass|secret|secret-key|access-key|aws-secret-access-key|aws-access-key-id|s3-secret-key|s3-access-key)(=.*)?$`)

// secret reads a credential from the environment variable envKey or from
// the file named by fileKey; setting both is an error.
func secret(env Env, envKey, file, fileKey string) (string, error) {
	v, inEnv := env.Lookup(envKey)
	if file == "" {
		return v, nil
	}
	if inEnv && v != "" {
		return "", &UsageError{fmt.Sprintf("both %s and %s are set: set only one", envKey, fileKey)}
	}
	b, err := env.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s (%s): %w", fileKey, file, err)
	}
	// Secrets written with echo end in a newline; the secret does not.
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// loadEncryption reads the recipients (public keys, for backup) and the
// identity (private keys, for restore), each from its variable or its file.
// A malformed value is a usage error that never echoes key material.
func (c *Config) loadEncryption(env Env) error {
	text, err := secret(env, contract.EnvEncryptionRecipients, env.get(contract.EnvEncryptionRecipientsFile), contract.EnvEncryptionRecipientsFile)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) != "" {
		if c.Recipients, err = crypt.ParseRecipients(text); err != nil {
			return &UsageError{contract.EnvEncryptionRecipients + ": " + err.Error()}
		}
	}
	text, err = secret(env, contract.EnvEncryptionIdentity, env.get(contract.EnvEncryptionIdentityFile), contract.EnvEncryptionIdentityFile)
	if err != nil {
		return err
	}
	c.identityText = text
	if strings.TrimSpace(text) != "" {
		if c.Identities, err = crypt.ParseIdentities(text); err != nil {
			return &UsageError{contract.EnvEncryptionIdentity + ": " + err.Error()}
		}
	}
	return nil
}
