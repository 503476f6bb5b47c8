package webhook

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/operators/migration/internal/migspec"
)

// Validator is the MigrationJob validating webhook. On create it rejects
// what the CRD schema cannot check as well (the same rules as the
// controller: cairn.dev/operators/migration/internal/migspec), one message
// per field naming the field and the fix; on update it refuses a change of
// anything but spec.cutover.approved. On create it also checks what the
// MigrationJob makes the operator use (admit: image allow-list, switchSecret
// opt-in, kubeconfig, the requester's rights).
type Validator struct {
	// Guard reviews the requester's rights (libs/access); nil skips it.
	Guard *access.Guard
	// Images is the spec.image allow-list; nil skips it.
	Images *access.Images
	// Reader reads the switchSecret's labels and the kubeconfig past the
	// cache; nil skips those checks.
	Reader client.Reader
}

var _ admission.Validator[*migrationv1.MigrationJob] = &Validator{}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, mj *migrationv1.MigrationJob) (admission.Warnings, error) {
	mj = mj.DeepCopy()
	mj.Spec.SetDefaults()
	if errs := migspec.Validate(mj.Name, mj.Namespace, &mj.Spec); len(errs) > 0 {
		return nil, apierrors.NewInvalid(migrationv1.GroupVersion.WithKind("MigrationJob").GroupKind(), mj.Name, errs)
	}
	w, err := v.admit(ctx, mj)
	if err != nil {
		return w, err
	}
	if mj.Spec.AllowNonEmptyTarget {
		w = append(w, "spec.allowNonEmptyTarget is true: included tables that exist in the target are replaced")
	}
	if mj.Spec.Cutover.Mode == migrationv1.CutoverAuto && (mj.Spec.Cutover.SourceReadOnly || mj.Spec.Cutover.SwitchSecret != nil) {
		w = append(w, "spec.cutover.mode is Auto: the declared cutover actions run without approval as soon as the target is verified")
	}
	if mj.Spec.Verify == migrationv1.VerifyNone {
		w = append(w, "spec.verify is None: the target is not compared with the source, neither after the copy nor at cutover (rows written to the source after the copy are not detected)")
	}
	if migspec.NeedsWritesStopped(&mj.Spec) && !migspec.WritesStopped(&mj.Spec) {
		w = append(w, "spec.cutover: writes to the source are not stopped at cutover (sourceReadOnly false): cutover will wait until you stop the applications writing to the source and set spec.cutover.writersStopped to true — a row written after that would not reach the target")
	}
	if st := mj.Spec.Transfer.Storage; st != nil && st.S3 != nil && (st.S3.Insecure || strings.HasPrefix(st.S3.Endpoint, "http://")) {
		w = append(w, "spec.transfer.storage.s3: plain HTTP: credentials and data travel unencrypted; use an https endpoint")
	}
	return w, nil
}

// ValidateUpdate implements admission.Validator: only spec.cutover.approved
// may change (and only from false to true makes a difference), and the
// approval annotation only as the defaulting webhook writes it: an update
// removing or changing it is refused (libs/access Guard.Admit); one that
// approves an object never approved is reviewed as a create.
func (v *Validator) ValidateUpdate(ctx context.Context, old, cur *migrationv1.MigrationJob) (admission.Warnings, error) {
	if !cur.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	o, c := old.Spec.DeepCopy(), cur.Spec.DeepCopy()
	o.SetDefaults()
	c.SetDefaults()
	if errs := migspec.ValidateUpdate(o, c, field.NewPath("spec")); len(errs) > 0 {
		return nil, apierrors.NewInvalid(migrationv1.GroupVersion.WithKind("MigrationJob").GroupKind(), cur.Name, errs)
	}
	if v.Guard != nil {
		gr := migrationv1.GroupVersion.WithResource("migrationjobs").GroupResource()
		if err := v.Guard.Admit(ctx, gr, access.MigrationJobKind, cur, old, access.MigrationJobChecks(cur), access.MigrationJobChecks(old)); err != nil {
			return nil, err
		}
	}
	if old.Spec.Cutover.Approved && !cur.Spec.Cutover.Approved && cur.Status.Phase != migrationv1.PhaseReadyForCutover {
		return admission.Warnings{"spec.cutover.approved set back to false: a cutover that started is not undone"}, nil
	}
	return nil, nil
}

// ValidateDelete implements admission.Validator; deletion is never refused.
func (*Validator) ValidateDelete(context.Context, *migrationv1.MigrationJob) (admission.Warnings, error) {
	return nil, nil
}
