package ownership

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// SkipOwnCreate is the predicate of an Owns watch on children the controller
// creates itself, in the pass that then records them in the owner's status:
// the child's create event is that pass's own write coming back, and a pass
// for it would find nothing to do (one reconcile per owner at creation
// instead of two).
//
// It drops a create event only when asCreated(child) says the child is
// still as its creator left it (AsCreated: no spec change, no deletion;
// agentjob.JobAsCreated also: no status yet). Everything else passes:
//   - update and delete events (a Job's status, a drifted or deleted child);
//   - a create event of a child that changed before the informer first saw
//     it (a relist after a watch expired can show a child created and
//     finished in the gap as a create);
//   - the create events of the informer's initial list (a restarted
//     operator: the owners' own initial events bring every owner back
//     anyway, and the work queue merges the two).
//
// A controller may use it only if no pass ends waiting for the child's
// create event: a pass that creates the child goes on with the object it
// created, and one that finds it missing from the cache while the API
// server has it requeues itself.
func SkipOwnCreate(asCreated func(client.Object) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return e.IsInInitialList || e.Object == nil || !asCreated(e.Object)
		},
	}
}

// AsCreated reports whether o's metadata shows it unchanged since its
// creation: generation 1 (the API server bumps it on every change outside
// metadata and status; 0 for kinds without one) and no deletion requested.
// It reads metadata only, so it also works on children cached as metadata.
func AsCreated(o client.Object) bool {
	return o.GetGeneration() <= 1 && o.GetDeletionTimestamp() == nil
}
