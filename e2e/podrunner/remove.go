package podrunner

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// removeWhenReported removes a deleted pod whose containers have all ended
// from the API server, as the kubelet does: once the pod's status there
// shows every container terminated, it deletes the pod with a zero grace
// period (the object then goes as soon as its finalizers are removed).
//
// virtual-kubelet does it only when its grace-period timer fires (it
// re-reads a pod on changes to its spec or deletion fields, not to its
// status), so a deleted pod whose agent had stopped, reported and exited
// in a second stayed for its whole grace period (30 s). A namespace
// deletion, which deletes pods first and waits for them to be gone with
// an exponential backoff, then took 60 s and more
// (TestNamespaceDeletionDropsAStoppedVerificationsScratchDatabase; issue
// 52's flake hunt).
//
// It waits for the terminated status to be written first, so that a Job's
// controller and an operator holding the pod by a finalizer read how its
// containers ended, and gives up after grace (virtual-kubelet's timer does
// it then).
func (p *provider) removeWhenReported(pod *corev1.Pod, grace time.Duration) {
	if p.cs == nil {
		return
	}
	ns, name, uid := pod.Namespace, pod.Name, pod.UID
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
		defer cancel()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			cur, err := p.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) || (err == nil && cur.UID != uid):
				return
			case err == nil && ended(cur):
				zero := int64(0)
				err := p.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
					GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: ptrTo(types.UID(uid))}})
				if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// ended reports whether the pod's status says that each of its containers
// has terminated (or never started).
func ended(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}
