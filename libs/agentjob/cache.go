package agentjob

import (
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/manager"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

var stripAndIntern = manager.TransformStripAndIntern()

// TransformRun is the cache transform of the agent's Jobs and Pods: it drops
// their spec (pod template, containers, env, volumes: most of a Job's size)
// and managedFields, and interns the strings left
// (manager.TransformStripAndIntern). What an operator reads of a cached run
// is kept: metadata (labels, owner references, deletion) and status
// (conditions, start time, counts, the agent's termination message:
// JobOutcome, PodResult). An operator using it must never read a cached
// Job's or Pod's spec, nor write a cached one back; what it needs of a spec
// it reads past the cache (APIReader), where that is rare.
func TransformRun(obj any) (any, error) {
	switch o := obj.(type) {
	case *batchv1.Job:
		o.Spec = batchv1.JobSpec{}
	case *corev1.Pod:
		o.Spec = corev1.PodSpec{}
	}
	return stripAndIntern(obj)
}

var _ toolscache.TransformFunc = TransformRun

// JobAsCreated reports whether a Job is as its creator left it: unchanged
// spec and no deletion (ownership.AsCreated), and no status yet (the Job
// controller has not started it). With ownership.SkipOwnCreate it drops
// the create event of an operator's own fresh Job and nothing else.
func JobAsCreated(o client.Object) bool {
	if !ownership.AsCreated(o) {
		return false
	}
	j, ok := o.(*batchv1.Job)
	return ok && reflect.DeepEqual(j.Status, batchv1.JobStatus{})
}

// Watch is what a controller whose objects run agent Jobs watches of them
// (reconcile.Complete): the Jobs it controls, whose create event is
// skipped while the Job is as created (the creating pass's own write: that
// pass goes on to observe it; its status changes and its deletion bring
// the owner back), and their Pods, mapped by label to their owner.
func Watch(label string) reconcile.Watch {
	return func(w *reconcile.Wiring) error {
		w.Builder.Owns(&batchv1.Job{}, builder.WithPredicates(ownership.SkipOwnCreate(JobAsCreated))).
			Watches(&corev1.Pod{}, ownership.EnqueueOwnerByLabel(label))
		return nil
	}
}

// ManagedByLabel selects what an operator caches of the objects it creates
// (Cache): app.kubernetes.io/managed-by, on every Job and Pod it runs.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Cache is the cache of an operator whose objects run the agent
// (manager.Operator.CacheByObject): only its own Jobs and Pods (labelled
// ManagedByLabel=managedBy), without their spec (TransformRun: a
// controller reads a cached run's metadata and status only); kinds (its
// own, and those it reads one or more of per object) with their repeated
// short strings interned (manager.TransformStripAndIntern); children,
// other objects it creates, selected by the same label and interned.
func Cache(managedBy string, kinds []client.Object, children ...client.Object) map[client.Object]cache.ByObject {
	sel := labels.SelectorFromSet(labels.Set{ManagedByLabel: managedBy})
	out := map[client.Object]cache.ByObject{
		&batchv1.Job{}: {Label: sel, Transform: TransformRun},
		&corev1.Pod{}:  {Label: sel, Transform: TransformRun},
	}
	for _, k := range kinds {
		out[k] = cache.ByObject{Transform: stripAndIntern}
	}
	for _, c := range children {
		out[c] = cache.ByObject{Label: sel, Transform: stripAndIntern}
	}
	return out
}
