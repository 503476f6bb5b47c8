package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/ownership"
)

// EnsureChild is "ensure an owned child" as a step does it, once for every
// kind: desired is created or reverted to (a.Ensure, with p.Obj its
// controller); a child of that name someone else controls stalls the
// object (NotControlled: never adopted nor changed); our own child not in
// the cache yet (AlreadyExists: an earlier pass created it) returns op ""
// and no error, and the object is looked at again in a second; any other
// error is returned naming the child; a create or update is logged.
func EnsureChild[T Object, S any](ctx context.Context, p *Pass[T, S], a *ownership.Applier, desired client.Object) (ownership.Op, error) {
	kind := fmt.Sprintf("%T", desired)
	if gvk, err := a.Client.GroupVersionKindFor(desired); err == nil {
		kind = gvk.Kind
	}
	op, err := a.Ensure(ctx, p.Obj, desired)
	var nc *ownership.NotControlledError
	switch {
	case errors.As(err, &nc):
		return "", Stalled(cairnv1.NotControlledReason, "%s", nc.Error())
	case apierrors.IsAlreadyExists(err):
		ctrl.LoggerFrom(ctx).V(1).Info(kind+" exists but is not cached yet", kind, desired.GetName())
		p.RequeueAfter(time.Second)
		return "", nil
	case err != nil:
		return "", fmt.Errorf("ensuring %s %s: %w", kind, desired.GetName(), err)
	case op != ownership.Unchanged:
		ctrl.LoggerFrom(ctx).Info(kind+" "+string(op), kind, desired.GetName())
	}
	return op, nil
}
