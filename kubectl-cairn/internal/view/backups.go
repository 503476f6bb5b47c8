package view

import (
	"fmt"
	"io"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	backupv1 "cairn.dev/apis/backup/v1"
)

// BackupRow is one artifact of `kubectl cairn backups`.
type BackupRow struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Time     string `json:"time"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
	Engine   string `json:"engine,omitempty"`
	Tables   int32  `json:"tables,omitempty"`
	Rows     int64  `json:"rows,omitempty"`
	// EncryptedTo lists the recipients; empty when not encrypted.
	EncryptedTo []string `json:"encryptedTo,omitempty"`
	// VerifiedBy is the verification RestoreJob that restored it.
	VerifiedBy string `json:"verifiedBy,omitempty"`
	// LockedUntil is its S3 Object Lock date (time zone as Time), as the
	// last prune reported it; empty when not known.
	LockedUntil string `json:"lockedUntil,omitempty"`
	// Retention is what the last prune decided (status.retention): "kept"
	// (with KeptFor, the reasons), "pruned" or "would prune" (dry run);
	// empty when that prune did not report it.
	Retention string   `json:"retention,omitempty"`
	KeptFor   []string `json:"keptFor,omitempty"`
}

// Retention words of a row.
const (
	RetentionKept       = "kept"
	RetentionPruned     = "pruned"
	RetentionWouldPrune = "would prune"
)

// Backups turns a catalog listing into rows, times in the time zone tz;
// ret (may be nil) is the BackupJob's status.retention, what its last
// prune kept (why, and locked until when) and pruned.
func Backups(cat *backupv1.CatalogListing, tz string, verified map[string]string, ret *backupv1.RetentionStatus) []BackupRow {
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		loc = time.UTC
	}
	kept := map[string]backupv1.KeptArtifact{}
	pruned := map[string]bool{}
	if ret != nil {
		for _, k := range ret.Kept {
			kept[k.Artifact] = k
		}
		for _, p := range ret.Pruned {
			pruned[p] = true
		}
	}
	var rows []BackupRow
	for _, a := range cat.Artifacts {
		r := BackupRow{Name: path.Base(a.Path), Path: a.Path, Size: a.Size, Checksum: a.Checksum, Engine: a.Engine,
			Tables: a.Tables, Rows: a.Rows, EncryptedTo: a.EncryptedTo, VerifiedBy: verified[a.Path]}
		if a.Time != nil {
			r.Time = a.Time.In(loc).Format("2006-01-02 15:04:05 MST")
		}
		if k, ok := kept[r.Name]; ok {
			r.Retention, r.KeptFor = RetentionKept, k.Reasons
			if k.LockedUntil != nil {
				r.LockedUntil = k.LockedUntil.In(loc).Format("2006-01-02 15:04:05 MST")
			}
		} else if pruned[r.Name] {
			r.Retention = RetentionPruned
			if ret.DryRun {
				r.Retention = RetentionWouldPrune
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// BackupsTable writes the rows; wide adds the engine, the recorded tables
// and rows, and the full path and checksum.
func BackupsTable(w io.Writer, rows []BackupRow, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := "NAME\tTIME\tSIZE\tCHECKSUM\tENCRYPTED TO\tLOCKED UNTIL\tRETENTION\tVERIFIED"
	if wide {
		cols += "\tENGINE\tTABLES\tROWS\tPATH"
	}
	fmt.Fprintln(tw, cols)
	for _, r := range rows {
		sum := r.Checksum
		if !wide && len(sum) > len("sha256:")+12 {
			sum = sum[:len("sha256:")+12] + "…"
		}
		enc := "-"
		if len(r.EncryptedTo) > 0 {
			enc = strings.Join(r.EncryptedTo, ",")
		}
		ver := "no"
		if r.VerifiedBy != "" {
			ver = "yes (" + r.VerifiedBy + ")"
		}
		ret := dash(r.Retention)
		if len(r.KeptFor) > 0 {
			ret = "kept: " + strings.Join(r.KeptFor, ",")
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Name, r.Time, HumanBytes(r.Size), sum, enc, dash(r.LockedUntil), ret, ver)
		if wide {
			line += fmt.Sprintf("\t%s\t%d\t%d\t%s", dash(r.Engine), r.Tables, r.Rows, r.Path)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// HumanBytes prints a size as "12.3 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
