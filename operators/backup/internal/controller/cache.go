package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheByObject keeps only the operator's own CronJobs, Jobs and Pods in
// memory (by ManagedByLabel). CronJobs are cached as metadata only (see
// SetupWithManager); the key here selects them by kind either way.
func CacheByObject() map[client.Object]cache.ByObject {
	sel := labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
	return map[client.Object]cache.ByObject{
		&batchv1.CronJob{}: {Label: sel},
		&batchv1.Job{}:     {Label: sel},
		&corev1.Pod{}:      {Label: sel},
	}
}
