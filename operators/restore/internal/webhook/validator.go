package webhook

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/operators/restore/internal/restorespec"
)

// Validator is the RestoreJob validating webhook, called on create. It
// rejects what the CRD schema cannot check — a malformed name, host or
// endpoint, both or neither source, and a target that is the database the
// source BackupJob backs up (unless spec.allowOverwriteSource) — with one
// message per field that names the field and the fix. It warns about legal
// but surprising settings.
type Validator struct {
	// Reader reads BackupJobs for the overwrite guard; the API server's
	// answer, not a cache, so a BackupJob created just before is seen.
	Reader client.Reader
	// Guard reviews the requester's rights on what the RestoreJob refers to
	// (libs/access): get on the target's and the store's credentials, on
	// the source BackupJob, and on a BackupJob of another namespace named
	// as the store's catalog key. Nil skips it (unit tests).
	Guard *access.Guard
}

var _ admission.Validator[*restorev1.RestoreJob] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, rj *restorev1.RestoreJob) (admission.Warnings, error) {
	// The defaulter ran before; default again for a request that skipped it.
	rj = rj.DeepCopy()
	rj.Spec.SetDefaults()
	errs := restorespec.Validate(rj.Name, &rj.Spec)
	var w admission.Warnings
	if len(errs) == 0 && v.Reader != nil {
		// Check as if overwriting were not allowed, to warn when it is.
		strict := rj.DeepCopy()
		strict.Spec.AllowOverwriteSource = false
		ferr, found, err := restorespec.CheckOverwrite(ctx, v.Reader, strict)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("checking the source BackupJob: %w", err))
		}
		switch {
		case ferr != nil && rj.Spec.AllowOverwriteSource:
			w = append(w, "spec.allowOverwriteSource is true: this RestoreJob overwrites the database its source BackupJob backs up")
		case ferr != nil:
			errs = append(errs, ferr)
		}
		if !found && rj.Spec.Source.BackupJob != nil {
			w = append(w, fmt.Sprintf("BackupJob %s not found in namespace %s: the RestoreJob waits for it", rj.Spec.Source.BackupJob.Name, rj.Namespace))
		}
	}
	if len(errs) > 0 {
		return w, apierrors.NewInvalid(restorev1.GroupVersion.WithKind("RestoreJob").GroupKind(), rj.Name, errs)
	}
	if v.Guard != nil {
		gr := restorev1.GroupVersion.WithResource("restorejobs").GroupResource()
		if err := v.Guard.Admit(ctx, gr, access.RestoreJobKind, rj, nil, access.RestoreJobChecks(rj), nil); err != nil {
			return w, err
		}
		sw, err := v.admitStore(ctx, gr, rj)
		w = append(w, sw...)
		if err != nil {
			return w, err
		}
	}
	if st := rj.Spec.Source.Store; st != nil && st.Storage.S3 != nil &&
		(st.Storage.S3.Insecure || strings.HasPrefix(st.Storage.S3.Endpoint, "http://")) {
		w = append(w, "spec.source.store.storage.s3: plain HTTP: credentials and backups travel unencrypted; use an https endpoint")
	}
	return w, nil
}

// ValidateUpdate implements admission.Validator. The CRD keeps the spec
// immutable; an update may not remove or change the approval annotation,
// and one approving an object never approved is reviewed as a create
// (libs/access Guard.Admit). An object being deleted is not checked.
func (v *Validator) ValidateUpdate(ctx context.Context, old, rj *restorev1.RestoreJob) (admission.Warnings, error) {
	if v.Guard == nil || !rj.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	gr := restorev1.GroupVersion.WithResource("restorejobs").GroupResource()
	return nil, v.Guard.Admit(ctx, gr, access.RestoreJobKind, rj, old, access.RestoreJobChecks(rj), access.RestoreJobChecks(old))
}

// ValidateDelete implements admission.Validator; deletion is never refused.
func (*Validator) ValidateDelete(context.Context, *restorev1.RestoreJob) (admission.Warnings, error) {
	return nil, nil
}
