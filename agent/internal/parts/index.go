// Package parts is the multi-part artifact format: a dump split into parts
// that are written, verified and restored independently and in parallel.
//
// A multi-part artifact named N (naming.ExtMySQLParts, "….sql.parts" or
// "….sql.parts.age") is stored as
//
//	N          the parts index (JSON, Index): every part's name, phase,
//	           table, size and checksum; written last, once every part is
//	           stored; never encrypted (it holds what the manifest holds)
//	N.d/<part> the parts, each its own zstd stream (and, encrypted, its own
//	           age stream), checksummed on its own
//
// The catalog's manifest records the index's size and checksum, so the
// chain manifest → index → part covers every stored byte. A restore checks
// a part's checksum while it streams it and commits the part only once the
// whole part matched (Restore). The single-file format stays: what is
// written depends on CAIRN_PARALLELISM, and both are read.
//
// Phases run in order: "schema" (one part per dump: tables, view
// stand-ins), then
// every "data" part (rows; in any order, over several connections), then
// every "index" part (a table's secondary indexes, taken out of its CREATE
// TABLE and built after its rows), then "post" (one part: triggers, views,
// routines, events: nothing that must exist while rows load; one part per
// dump). Each part begins with the dump's preamble (the
// session settings), so every part also restores by hand on its own:
// `zstd -d < N.d/data-00001.sql.zst | mysql db`.
package parts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Kind and Version identify an index.
const (
	Kind    = "CairnPartsIndex"
	Version = 1
)

// Phases of a part.
const (
	PhaseSchema = "schema"
	PhaseData   = "data"
	// PhaseIndex parts add a table's secondary indexes after its rows
	// (keys.go): one ALTER TABLE each, run at once on several connections.
	PhaseIndex = "index"
	PhasePost  = "post"
)

// Index lists an artifact's parts, schema first and post last.
type Index struct {
	Kind        string `json:"kind"`
	Version     int    `json:"version"`
	Engine      string `json:"engine"`
	Format      string `json:"format"`
	Compression string `json:"compression"`
	// Encrypted: every part is an age stream (the index is not).
	Encrypted bool   `json:"encrypted,omitempty"`
	Parts     []Part `json:"parts"`
}

// Part is one stored part.
type Part struct {
	// Name is the part's file name in the artifact's parts directory.
	Name  string `json:"name"`
	Phase string `json:"phase"`
	// Table is the table a data part holds rows of (as the dump names it).
	Table string `json:"table,omitempty"`
	// RawSize is the size of the part's SQL before compression.
	RawSize int64 `json:"rawSize"`
	// Size and Checksum ("sha256:<hex>") are of the stored bytes.
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// Stored returns the stored bytes of all parts.
func (x *Index) Stored() int64 {
	var n int64
	for _, p := range x.Parts {
		n += p.Size
	}
	return n
}

// Encode returns the index as indented JSON.
func (x *Index) Encode() []byte {
	b, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		panic(err) // plain data
	}
	return append(b, '\n')
}

// Decode parses and checks an index.
func Decode(data []byte) (*Index, error) {
	var x Index
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&x); err != nil {
		return nil, fmt.Errorf("parts index is not valid JSON: %w", err)
	}
	switch {
	case x.Kind != Kind:
		return nil, fmt.Errorf("parts index: kind %q, want %q", x.Kind, Kind)
	case x.Version != Version:
		return nil, fmt.Errorf("parts index: version %d is not supported (this agent reads version %d)", x.Version, Version)
	case len(x.Parts) < 2:
		return nil, fmt.Errorf("parts index: %d part(s), want at least a schema and a post part", len(x.Parts))
	}
	// schema+ data* index* post+
	order := map[string]int{PhaseSchema: 0, PhaseData: 1, PhaseIndex: 2, PhasePost: 3}
	seen := map[string]bool{}
	last := 0
	for i, p := range x.Parts {
		if p.Name == "" || strings.ContainsAny(p.Name, "/\\") || strings.HasPrefix(p.Name, ".") || seen[p.Name] {
			return nil, fmt.Errorf("parts index: part %d has a bad or repeated name %q", i, p.Name)
		}
		seen[p.Name] = true
		if p.Size < 0 || !strings.HasPrefix(p.Checksum, "sha256:") || len(p.Checksum) != len("sha256:")+64 {
			return nil, fmt.Errorf("parts index: part %s: bad size or checksum", p.Name)
		}
		o, ok := order[p.Phase]
		if !ok || o < last || i == 0 && o != 0 {
			return nil, fmt.Errorf("parts index: part %s: phase %q out of place", p.Name, p.Phase)
		}
		last = o
	}
	if last != order[PhasePost] {
		return nil, fmt.Errorf("parts index: no post part")
	}
	return &x, nil
}

// Schema returns the schema parts.
func (x *Index) Schema() []Part { return x.phase(PhaseSchema) }

// Post returns the post parts.
func (x *Index) Post() []Part { return x.phase(PhasePost) }

// Data returns the data parts.
func (x *Index) Data() []Part { return x.phase(PhaseData) }

// Indexes returns the index parts.
func (x *Index) Indexes() []Part { return x.phase(PhaseIndex) }

func (x *Index) phase(ph string) []Part {
	var out []Part
	for _, p := range x.Parts {
		if p.Phase == ph {
			out = append(out, p)
		}
	}
	return out
}
