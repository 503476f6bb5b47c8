package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/remote"
	"cairn.dev/operators/migration/internal/migspec"
)

// admit is what a MigrationJob may make the operator use, checked on
// create (the references cannot change afterwards):
//   - spec.image only from the allow-list;
//   - the switchSecret only when it carries the opt-in label;
//   - the kubeconfig only when the operator would use it (https server, no
//     proxy, no exec plugin or file path);
//   - every reference only when the requester may use it (libs/access).
//
// A Secret that does not exist yet is a warning: the controller checks the
// label and the kubeconfig again when it uses them.
func (v *Validator) admit(ctx context.Context, mj *migrationv1.MigrationJob) (admission.Warnings, error) {
	gk := migrationv1.GroupVersion.WithKind("MigrationJob").GroupKind()
	var w admission.Warnings
	var errs field.ErrorList
	if img := mj.Spec.Image; img != "" && v.Images != nil && !v.Images.Allowed(img) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "image"), v.Images.NotAllowed("spec.image", img)))
	}
	if v.Reader != nil {
		if s := mj.Spec.Cutover.SwitchSecret; s != nil {
			sec := &corev1.Secret{}
			err := v.Reader.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: s.Name}, sec)
			switch {
			case apierrors.IsNotFound(err):
				w = append(w, fmt.Sprintf("spec.cutover.switchSecret: Secret %q not found; it must exist with the label %s=%s when the cutover runs",
					s.Name, migrationv1.SwitchableLabel, migrationv1.SwitchableValue))
			case err != nil:
				return w, apierrors.NewInternalError(fmt.Errorf("reading the switchSecret: %w", err))
			case sec.Labels[migrationv1.SwitchableLabel] != migrationv1.SwitchableValue:
				errs = append(errs, field.Forbidden(field.NewPath("spec", "cutover", "switchSecret"), migspec.NotSwitchable(mj.Namespace, s.Name)))
			}
		}
		if k := mj.Spec.Target.KubeconfigSecretRef; k != nil {
			key := k.Key
			if key == "" {
				key = remote.DefaultKey
			}
			sec := &corev1.Secret{}
			err := v.Reader.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: k.Name}, sec)
			switch {
			case apierrors.IsNotFound(err):
				w = append(w, fmt.Sprintf("spec.target.kubeconfigSecretRef: Secret %q not found: the MigrationJob waits for it", k.Name))
			case err != nil:
				return w, apierrors.NewInternalError(fmt.Errorf("reading the kubeconfig Secret: %w", err))
			case len(sec.Data[key]) > 0:
				if err := remote.Validate(sec.Data[key]); err != nil {
					errs = append(errs, field.Invalid(field.NewPath("spec", "target", "kubeconfigSecretRef"), k.Name,
						fmt.Sprintf("the kubeconfig in Secret %q key %q: %s", k.Name, key, remote.Sanitize(err.Error()))))
				}
			}
		}
	}
	if len(errs) > 0 {
		return w, apierrors.NewInvalid(gk, mj.Name, errs)
	}
	if v.Guard != nil {
		gr := migrationv1.GroupVersion.WithResource("migrationjobs").GroupResource()
		if err := v.Guard.Admit(ctx, gr, access.MigrationJobKind, mj, nil, access.MigrationJobChecks(mj), nil); err != nil {
			return w, err
		}
	}
	return w, nil
}
