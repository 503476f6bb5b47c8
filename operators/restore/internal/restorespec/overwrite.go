package restorespec

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/validation"
)

// SourceBackupJob is the BackupJob a RestoreJob's source refers to: the
// referenced BackupJob, or the one named by the store's catalog key (which
// may not exist in this cluster). ok is false for a source naming neither.
func SourceBackupJob(rj *restorev1.RestoreJob) (key types.NamespacedName, ok bool) {
	switch src := rj.Spec.Source; {
	case src.BackupJob != nil && src.BackupJob.Name != "":
		return types.NamespacedName{Namespace: rj.Namespace, Name: src.BackupJob.Name}, true
	case src.Store != nil:
		ns, name, found := strings.Cut(src.Store.BackupJob, "/")
		if found && ns != "" && name != "" {
			return types.NamespacedName{Namespace: ns, Name: name}, true
		}
	}
	return types.NamespacedName{}, false
}

// OverwriteError returns the field error refusing rj when its target is the
// database bj backs up (by address: validation.SameDatabase; the agent
// compares the servers' identities before it writes) and
// spec.allowOverwriteSource is not true, else nil.
// rj's spec should be defaulted.
func OverwriteError(rj *restorev1.RestoreJob, bj *backupv1.BackupJob) *field.Error {
	if rj.Spec.AllowOverwriteSource || !validation.SameDatabase(rj.Spec.Target, validation.Scope{Namespace: rj.Namespace}, bj.Spec.Database, validation.Scope{Namespace: bj.Namespace}) {
		return nil
	}
	t := rj.Spec.Target
	return field.Forbidden(field.NewPath("spec", "target"), fmt.Sprintf(
		"this is the database BackupJob %s/%s backs up (%s %s:%d/%s): restoring would overwrite it; "+
			"restore into another database, or set spec.allowOverwriteSource: true to overwrite it on purpose",
		bj.Namespace, bj.Name, t.Engine, t.Host, t.Port, t.Database))
}

// CheckOverwrite reads the BackupJob rj's source refers to and applies
// OverwriteError. A BackupJob that does not exist is no conflict; found says
// whether it exists.
func CheckOverwrite(ctx context.Context, r client.Reader, rj *restorev1.RestoreJob) (ferr *field.Error, found bool, err error) {
	key, ok := SourceBackupJob(rj)
	if !ok {
		return nil, false, nil
	}
	bj := &backupv1.BackupJob{}
	if err := r.Get(ctx, key, bj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading BackupJob %s: %w", key, err)
	}
	return OverwriteError(rj, bj), true, nil
}
