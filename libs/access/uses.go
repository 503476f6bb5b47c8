package access

import (
	"fmt"
	"slices"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// This file lists, for every Cairn kind, where its spec sends the
// credentials it names and the data they guard: the database servers
// (engine, host, port, database), the stores (S3 endpoint, bucket, prefix,
// region, plain HTTP; claim and sub-path), the encryption recipients, the
// Object Lock retention, a plan's scratch database, a migration's target
// cluster. Every check of an object carries all of them (Check.Uses): a
// changed destination is a new use of every credential the object names,
// since each one guards data that now goes elsewhere (a database's rows
// to a new store, a backup decrypted with the plan's identity to a new
// scratch server). A new destination field in apis/ must be added here.

// uses is a list of "field=value".
type uses []string

func (u *uses) add(field string, value any) {
	*u = append(*u, fmt.Sprintf("%s=%v", field, value))
}

func (u *uses) database(db *cairnv1.DatabaseRef, field string) {
	port := db.Port
	if port == 0 {
		port = cairnv1.DefaultPort(db.Engine)
	}
	u.add(field+".engine", db.Engine)
	u.add(field+".host", db.Host)
	u.add(field+".port", port)
	u.add(field+".database", db.Database)
}

func (u *uses) storage(st *cairnv1.StorageSpec, field string) {
	switch {
	case st == nil:
		u.add(field, "none")
	case st.S3 != nil:
		s := st.S3
		u.add(field+".s3.endpoint", s.Endpoint)
		u.add(field+".s3.bucket", s.Bucket)
		u.add(field+".s3.prefix", s.Prefix)
		u.add(field+".s3.region", s.Region)
		u.add(field+".s3.insecure", s.Insecure)
	case st.PVC != nil:
		u.add(field+".pvc.claimName", st.PVC.ClaimName)
		u.add(field+".pvc.subPath", st.PVC.SubPath)
	}
}

func (u *uses) recipients(r *cairnv1.RecipientsSource, field string) {
	switch {
	case r == nil:
		u.add(field, "none")
	case r.SecretKeyRef != nil:
		u.add(field+".recipients", "secret "+r.SecretKeyRef.Name+"/"+r.SecretKeyRef.Key)
	case r.ConfigMapKeyRef != nil:
		u.add(field+".recipients", "configmap "+r.ConfigMapKeyRef.Name+"/"+r.ConfigMapKeyRef.Key)
	}
}

func (u *uses) encryption(e *cairnv1.EncryptionSpec, field string) {
	if e == nil {
		u.recipients(nil, field)
		return
	}
	u.recipients(&e.Recipients, field)
}

// objectLock: mode and the days each artifact is locked (Days, else
// retentionDays, else the default 7: a lock without days follows the
// retention).
func (u *uses) objectLock(l *backupv1.ObjectLockSpec, retentionDays int32, field string) {
	if l == nil {
		u.add(field, "none")
		return
	}
	u.add(field+".mode", l.Mode)
	u.add(field+".days", lockDays(l, retentionDays))
}

func lockDays(l *backupv1.ObjectLockSpec, retentionDays int32) int32 {
	switch {
	case l.Days > 0:
		return l.Days
	case retentionDays > 0:
		return retentionDays
	}
	return 7
}

func (u *uses) migration(spec *migrationv1.MigrationJobSpec, field string) {
	u.database(&spec.Source, field+".source")
	if k := spec.Target.KubeconfigSecretRef; k != nil {
		u.add(field+".target.kubeconfigSecretRef", k.Name+"/"+k.Key)
		u.add(field+".target.namespace", spec.Target.Namespace)
	}
	u.database(&spec.Target.DatabaseRef, field+".target")
	u.storage(spec.Transfer.Storage, field+".transfer.storage")
	if e := spec.Transfer.Encryption; e != nil {
		u.recipients(&e.Recipients, field+".transfer.encryption")
	} else {
		u.recipients(nil, field+".transfer.encryption")
	}
}

// with sets every check's Uses to u, sorted.
func with(checks []Check, u uses) []Check {
	u = slices.Clone(u)
	slices.Sort(u)
	for i := range checks {
		checks[i].Uses = u
	}
	return checks
}

func backupJobUses(spec *backupv1.BackupJobSpec) uses {
	var u uses
	u.database(&spec.Database, "spec.database")
	u.storage(&spec.Storage, "spec.storage")
	u.encryption(spec.Encryption, "spec.encryption")
	u.objectLock(spec.ObjectLock, spec.RetentionDays, "spec.objectLock")
	return u
}

func planUses(spec *platformv1.ProtectionPlanSpec) uses {
	var u uses
	u.database(&spec.Database, "spec.database")
	u.storage(&spec.Backup.Storage, "spec.backup.storage")
	u.encryption(spec.Backup.Encryption, "spec.backup.encryption")
	u.objectLock(spec.Backup.ObjectLock, spec.Backup.RetentionDays, "spec.backup.objectLock")
	ri := &spec.Verification.RestoreInto
	u.database(&cairnv1.DatabaseRef{Engine: spec.Database.Engine, Host: ri.Host, Port: ri.Port, Database: ri.Database},
		"spec.verification.restoreInto")
	if m := spec.Migration; m != nil {
		u.migration(&m.Template, "spec.migration.template")
	}
	return u
}
