package pitr

// PostgreSQL point-in-time recovery: the write-ahead log, archived segment
// by segment (docs/pitr.md, "PostgreSQL: the write-ahead log"). This file:
// segment names, positions and the archiver's slot name.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"cairn.dev/agent/contract"
)

// walNameLen is the length of a WAL segment file name: timeline, log and
// segment, 8 hex digits each.
const walNameLen = 24

// PGBinDir is where Debian's postgresql-15 puts the server's own programs
// (postgres, pg_waldump); the client programs are on PATH.
const PGBinDir = "/usr/lib/postgresql/15/bin"

// PGTool finds a PostgreSQL program: on PATH, else in PGBinDir.
func PGTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join(PGBinDir, name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s not found on PATH nor in %s: install postgresql-15", name, PGBinDir)
}

// LSN is a position in the write-ahead log.
type LSN uint64

// ParseLSN reads "16/B374D848".
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad LSN %q", s)
	}
	return LSN(h<<32 | l), nil
}

func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xffffffff) }

// WALName is the file name of the segment holding lsn on timeline tli, for
// segments of segSize bytes.
func WALName(tli int, lsn LSN, segSize int64) string {
	segno := uint64(lsn) / uint64(segSize)
	return walFile(tli, segno, segSize)
}

func walFile(tli int, segno uint64, segSize int64) string {
	per := uint64(0x100000000) / uint64(segSize)
	return fmt.Sprintf("%08X%08X%08X", tli, segno/per, segno%per)
}

// parseWAL reads a segment file name: its timeline and segment number.
func parseWAL(name string, segSize int64) (tli int, segno uint64, ok bool) {
	if len(name) != walNameLen {
		return 0, 0, false
	}
	t, err1 := strconv.ParseUint(name[:8], 16, 32)
	lg, err2 := strconv.ParseUint(name[8:16], 16, 32)
	sg, err3 := strconv.ParseUint(name[16:], 16, 32)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	per := uint64(0x100000000) / uint64(segSize)
	return int(t), lg*per + sg, true
}

// NextWAL is the segment after name on the same timeline.
func NextWAL(name string, segSize int64) string {
	tli, segno, ok := parseWAL(name, segSize)
	if !ok {
		return ""
	}
	return walFile(tli, segno+1, segSize)
}

// SlotName is the physical replication slot of a BackupJob's archiver
// ("<namespace>/<name>"): contract.SlotName, which the operator names in
// its events too.
func SlotName(job string) string { return contract.SlotName(job) }
