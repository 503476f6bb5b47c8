package webhook

import (
	"testing"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

func TestDefaulter(t *testing.T) {
	testenv.CheckDefaulter(t, NewDefaulter(nil), func() *restorev1.RestoreJob {
		return &restorev1.RestoreJob{Spec: restorev1.RestoreJobSpec{Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine}}}
	}, func(rj *restorev1.RestoreJob) bool { return rj.Spec.MaxRetries != nil && rj.Spec.Target.Port == 5432 })
}
