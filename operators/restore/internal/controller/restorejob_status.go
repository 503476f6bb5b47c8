package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/references"
	"cairn.dev/operators/restore/internal/restorespec"
)

// transition counts a RestoreJob that just reached Succeeded or Failed (the
// skeleton has emitted the transition Event), and warns when a target that
// should have been dropped after the checks was not.
func transition(_ context.Context, rec events.EventRecorder, old, rj *restorev1.RestoreJob) {
	if rj.Finished() && !old.Finished() {
		metrics.Finish(rj)
		if why, ok := notDropped(rj); ok {
			rec.Eventf(rj, nil, corev1.EventTypeWarning, restorev1.RestoreJobTargetNotDroppedReason, "Drop",
				"target database %s was not dropped after the checks%s", describeTarget(rj.Spec.Target), why)
		}
	}
}

// recordChecks copies the agent's check results and what it did to the
// target into status.
func recordChecks(rj *restorev1.RestoreJob, res *contract.Result) {
	rj.Status.Checks = nil
	for _, c := range res.Checks {
		rj.Status.Checks = append(rj.Status.Checks, restorev1.CheckResult{Name: c.Name, Passed: c.Passed, Value: c.Value, Message: c.Message})
	}
	rj.Status.TargetCreated = res.TargetCreated
	rj.Status.TargetDropped = res.TargetDropped
	rj.Status.Verified = res.Verified
}

// checksOutcome says whether every check of spec has a passing result: an
// empty reason when so (or when there are no checks), else the reason and a
// message naming the checks that failed or were not reported.
func checksOutcome(spec *restorev1.RestoreJobSpec, results []restorev1.CheckResult) (reason, msg string) {
	if len(spec.Checks) == 0 {
		return "", ""
	}
	got := map[string]restorev1.CheckResult{}
	for _, r := range results {
		got[r.Name] = r
	}
	var failed, missing []string
	for _, c := range spec.Checks {
		r, ok := got[c.Name]
		switch {
		case !ok:
			missing = append(missing, c.Name)
		case !r.Passed:
			f := c.Name
			if r.Message != "" {
				f += " (" + r.Message + ")"
			}
			failed = append(failed, f)
		}
	}
	switch {
	case len(failed) > 0:
		return restorev1.RestoreJobChecksFailedReason, fmt.Sprintf("%d of %d check(s) failed: %s",
			len(failed), len(spec.Checks), strings.Join(failed, "; "))
	case len(missing) > 0:
		return restorev1.RestoreJobChecksNotReportedReason, fmt.Sprintf(
			"the agent reported no result for check(s) %s (is the agent image older than the checks?)", strings.Join(missing, ", "))
	}
	return "", ""
}

// dropNote completes the Ready message with what happened to the target.
func dropNote(spec *restorev1.RestoreJobSpec, rj *restorev1.RestoreJob, res *contract.Result) string {
	switch {
	case !spec.DropTargetAfterChecks:
		return ""
	case rj.Status.TargetDropped:
		return "; the target database was dropped"
	case res != nil && res.DropError != "":
		return "; the target database was NOT dropped: " + res.DropError
	}
	return "; the target database was NOT dropped"
}

// notDropped reports a restore that ran (the Job succeeded) with
// spec.dropTargetAfterChecks but left its target, and why (from the
// Ready message dropNote completed).
func notDropped(rj *restorev1.RestoreJob) (string, bool) {
	if !rj.Spec.DropTargetAfterChecks || rj.Status.TargetDropped {
		return "", false
	}
	c := conditions.Get(rj, cairnv1.ReadyCondition)
	if c == nil {
		return "", false
	}
	_, why, ok := strings.Cut(c.Message, "NOT dropped")
	return why, ok
}

// restoreReferences are the objects a restore of rj needs: the target's
// credentials Secret and the store's PVC or S3 credentials.
func restoreReferences(namespace string, spec *restorev1.RestoreJobSpec, storage cairnv1.StorageSpec) []references.Ref {
	return append(agentjob.References(namespace, &spec.Target, "spec.target", storage, "spec.source.store.storage"),
		agentjob.EncryptionReferences(namespace, agentjob.RestoreEncryption(spec.Encryption), "spec.encryption")...)
}

// restoreJobReferences indexes a RestoreJob by the objects it needs (for
// their events to wake it).
func restoreJobReferences(o client.Object) []references.Ref {
	rj, ok := o.(*restorev1.RestoreJob)
	if !ok {
		return nil
	}
	var st cairnv1.StorageSpec
	if rj.Spec.Source.Store != nil {
		st = rj.Spec.Source.Store.Storage
	}
	return restoreReferences(rj.Namespace, &rj.Spec, st)
}

// restoreJobIndex is what a RestoreJob is indexed under: its source
// BackupJob and the objects a restore needs.
func restoreJobIndex(o client.Object) []ownership.Reference {
	rj, ok := o.(*restorev1.RestoreJob)
	if !ok {
		return nil
	}
	refs := references.References(restoreJobReferences(rj))
	if key, ok := restorespec.SourceBackupJob(rj); ok {
		refs = append(refs, ownership.Reference{GroupKind: backupv1.GroupVersion.WithKind("BackupJob").GroupKind(), NamespacedName: key})
	}
	return refs
}
