package contract

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Catalog is what `agent list` reports as its result line and termination
// message: the Summary (its fields inline, so a reader of the summary reads
// it unchanged) and the newest artifacts, newest first, as many as fit in
// MaxMessageBytes (Count says how many the catalog holds). The backup
// operator records it in BackupJob status.catalog, so a user sees the
// store's catalog without the store's credentials.
type Catalog struct {
	Summary
	Artifacts []CatalogEntry `json:"artifacts,omitempty"`
}

// CatalogEntry is one artifact of a Catalog.
type CatalogEntry struct {
	// Path is the artifact's path in the store (as Result.Artifact).
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Checksum string    `json:"checksum"`
	End      time.Time `json:"end"`
	Engine   string    `json:"engine,omitempty"`
	// Tables and Rows are the backup's recorded inventory, when it has one.
	Tables int   `json:"tables,omitempty"`
	Rows   int64 `json:"rows,omitempty"`
	// EncryptedTo are the fingerprints of the recipients the artifact is
	// encrypted to (as Result.EncryptedTo); empty when not encrypted.
	EncryptedTo []string `json:"encryptedTo,omitempty"`
}

// MarshalCatalog returns c as one JSON line of at most MaxMessageBytes,
// leaving out the oldest artifacts until it fits. c.Artifacts must be
// newest first.
func MarshalCatalog(c Catalog) ([]byte, error) {
	for {
		b, err := Marshal(c)
		if err != nil || len(b) <= MaxMessageBytes || len(c.Artifacts) == 0 {
			return b, err
		}
		// Cut proportionally, then one at a time near the limit.
		keep := len(c.Artifacts) * MaxMessageBytes / len(b)
		if keep >= len(c.Artifacts) {
			keep = len(c.Artifacts) - 1
		}
		c.Artifacts = c.Artifacts[:keep]
	}
}

// ParseCatalog decodes a `list` termination message; an agent failure is a
// *FailedError.
func ParseCatalog(message string) (*Catalog, error) { return parseReport[Catalog](message, "list") }

// parseReport decodes the termination message of a command whose report
// names it in "command"; an agent failure is a *FailedError.
func parseReport[T any](message, command string) (*T, error) {
	message = strings.TrimSpace(message)
	var probe struct {
		Error   *string `json:"error"`
		Command string  `json:"command"`
	}
	if err := json.Unmarshal([]byte(message), &probe); err != nil {
		return nil, fmt.Errorf("termination message is not agent JSON: %q", truncate(message, 200))
	}
	if probe.Error != nil {
		return nil, parseFailure(message)
	}
	if probe.Command != command {
		return nil, fmt.Errorf("termination message is not a %s report", command)
	}
	var r T
	if err := json.Unmarshal([]byte(message), &r); err != nil {
		return nil, fmt.Errorf("malformed %s report: %w", command, err)
	}
	return &r, nil
}
