package access

import (
	"fmt"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// An update that removes encryption or weakens Object Lock changes what
// a leaked store key, or anyone who can read the store, gets: plaintext
// dumps, artifacts deletable sooner. Besides the review of every
// credential the object names (their uses change, Changed), it needs the
// right to read the key material the removed protection used — the
// recipients' Secret or ConfigMap, and on a plan the verification
// identity — and it is warned about.

// Weakening is what an update that removes or shortens protection needs:
// Checks to review for the requester (besides Changed) and Warnings for the
// admission response.
type Weakening struct {
	Checks   []Check
	Warnings []string
}

func (w *Weakening) encryption(ns string, old, next *cairnv1.EncryptionSpec, field string) {
	if old == nil || next != nil {
		return
	}
	for _, c := range encryption(ns, old, field) {
		c.Because = "this update removes " + field
		w.Checks = append(w.Checks, c)
	}
	w.Warnings = append(w.Warnings, fmt.Sprintf("%s is removed: the next backups are stored unencrypted "+
		"(artifacts already stored keep their encryption)", field))
}

func (w *Weakening) objectLock(old, next *backupv1.ObjectLockSpec, oldDays, nextDays int32, field string) {
	switch {
	case old == nil:
		return
	case next == nil:
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s is removed: the next artifacts are written without Object Lock "+
			"and can be deleted by anyone holding the store's key (artifacts already locked stay locked)", field))
	case old.Mode == "Compliance" && next.Mode != "Compliance":
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s.mode: %s to %s: the next artifacts can be removed by a principal "+
			"allowed to bypass governance retention", field, old.Mode, next.Mode))
	case lockDays(next, nextDays) < lockDays(old, oldDays):
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s.days: %d to %d: the next artifacts are locked for less time",
			field, lockDays(old, oldDays), lockDays(next, nextDays)))
	}
}

// BackupJobWeakening is what an update of old to next that removes
// spec.encryption or removes or shortens spec.objectLock needs.
func BackupJobWeakening(old, next *backupv1.BackupJob) Weakening {
	var w Weakening
	w.encryption(next.Namespace, old.Spec.Encryption, next.Spec.Encryption, "spec.encryption")
	w.objectLock(old.Spec.ObjectLock, next.Spec.ObjectLock, old.Spec.RetentionDays, next.Spec.RetentionDays, "spec.objectLock")
	return w
}

// ProtectionPlanWeakening is BackupJobWeakening for a plan's backup; the
// plan's verification identity (it decrypts every backup) is reviewed too
// when encryption is removed.
func ProtectionPlanWeakening(old, next *platformv1.ProtectionPlan) Weakening {
	var w Weakening
	o, n := &old.Spec.Backup, &next.Spec.Backup
	w.encryption(next.Namespace, o.Encryption, n.Encryption, "spec.backup.encryption")
	if o.Encryption != nil && n.Encryption == nil {
		for _, c := range decryption(next.Namespace, old.Spec.Verification.Encryption, "spec.verification.encryption") {
			c.Because = "this update removes spec.backup.encryption"
			w.Checks = append(w.Checks, c)
		}
	}
	w.objectLock(o.ObjectLock, n.ObjectLock, o.RetentionDays, n.RetentionDays, "spec.backup.objectLock")
	return w
}
