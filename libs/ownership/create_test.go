package ownership_test

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/ownership"
)

// SkipOwnCreate drops only the create event of a child as created, outside
// the initial list; every other event passes.
func TestSkipOwnCreateDropsOnlyAFreshChildsCreate(t *testing.T) {
	now := metav1.Now()
	fresh := func() *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", Generation: 1}}
	}
	started := fresh()
	started.Status.Active = 1
	finished := fresh()
	finished.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: "True"}}
	edited := fresh()
	edited.Generation = 2
	deleting := fresh()
	deleting.DeletionTimestamp = &now

	p := ownership.SkipOwnCreate(agentjob.JobAsCreated)
	cases := []struct {
		name string
		e    event.CreateEvent
		want bool
	}{
		{"fresh Job: the controller's own write", event.CreateEvent{Object: fresh()}, false},
		{"fresh Job in the initial list (restart)", event.CreateEvent{Object: fresh(), IsInInitialList: true}, true},
		{"started before first seen (relist)", event.CreateEvent{Object: started}, true},
		{"finished before first seen (relist)", event.CreateEvent{Object: finished}, true},
		{"spec changed", event.CreateEvent{Object: edited}, true},
		{"being deleted", event.CreateEvent{Object: deleting}, true},
	}
	for _, c := range cases {
		if got := p.Create(c.e); got != c.want {
			t.Errorf("%s: Create = %v, want %v", c.name, got, c.want)
		}
	}
	if !p.Update(event.UpdateEvent{ObjectOld: fresh(), ObjectNew: finished}) {
		t.Error("a status update was dropped")
	}
	if !p.Delete(event.DeleteEvent{Object: fresh()}) {
		t.Error("a deletion was dropped")
	}
	if !p.Generic(event.GenericEvent{Object: fresh()}) {
		t.Error("a generic event was dropped")
	}

	// Metadata only (AsCreated): generation and deletion.
	m := ownership.SkipOwnCreate(ownership.AsCreated)
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}}
	if m.Create(event.CreateEvent{Object: meta}) {
		t.Error("a fresh child's create event passed")
	}
	meta.Generation = 3
	if !m.Create(event.CreateEvent{Object: meta}) {
		t.Error("a changed child's create event was dropped")
	}
}
