package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
)

// admitStore is issue 47 item 9's decision: a RestoreJob from
// spec.source.backupJob reads that BackupJob's store with the BackupJob's
// credentials, so its requester must be allowed to read the store
// themselves — get on the store's S3 credentials Secret, or on its claim —
// not only get on the BackupJob (which would let anyone with cairn-edit
// restore every unencrypted backup of the namespace into a server of their
// choice). Checked when the BackupJob exists; one that does not exist yet
// is a warning (the RestoreJob waits for it, and its store is reviewed for
// whoever creates it). An encrypted artifact needs the identity besides
// (spec.encryption, reviewed as a reference).
func (v *Validator) admitStore(ctx context.Context, gr schema.GroupResource, rj *restorev1.RestoreJob) (admission.Warnings, error) {
	src := rj.Spec.Source.BackupJob
	if src == nil || src.Name == "" || v.Reader == nil {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no admission request in the context: %w", err))
	}
	bj := &backupv1.BackupJob{}
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: src.Name}, bj); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Warnings{fmt.Sprintf("spec.source.backupJob: BackupJob %q not found: whether you may read its store "+
				"could not be checked", src.Name)}, nil
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("reading the source BackupJob: %w", err))
	}
	var checks []access.Check
	field := "spec.source.backupJob.name (BackupJob " + bj.Name + "'s spec.storage"
	switch st := bj.Spec.Storage; {
	case st.S3 != nil && st.S3.CredentialsSecretRef.Name != "":
		checks = append(checks, access.GetSecret(rj.Namespace, st.S3.CredentialsSecretRef.Name, field+".s3.credentialsSecretRef)"))
	case st.PVC != nil && st.PVC.ClaimName != "":
		checks = append(checks, access.GetClaim(rj.Namespace, st.PVC.ClaimName, field+".pvc.claimName)"))
	}
	return nil, v.Guard.Reviewer.Review(ctx, req.UserInfo, gr, rj.Name, checks)
}
