package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/conditions"
)

// outcomeKind is what the steps found of the migration as a whole in a
// pass; summarize turns it into the conditions (and the final phase).
type outcomeKind int

const (
	// outcomeRunning: a step's Job is starting or running (Reconciling).
	outcomeRunning outcomeKind = iota + 1
	// outcomeAwaiting: a person must act (approve, stop the writers): not
	// Ready, not Stalled, nothing retried.
	outcomeAwaiting
	// outcomeAborting: failing, first undoing the changes to the source
	// (Reconciling).
	outcomeAborting
	// outcomeFailed: phase Failed, Stalled.
	outcomeFailed
	// outcomeSucceeded: phase Succeeded, Ready.
	outcomeSucceeded
)

// outcome is the steps' last finding in a pass.
type outcome struct {
	kind        outcomeKind
	reason, msg string
}

// decide records the steps' finding; the last one of a pass counts.
func (s *state) decide(kind outcomeKind, reason, msg string) {
	s.outcome = &outcome{kind: kind, reason: reason, msg: msg}
}

// summarize is the one place the MigrationJob's Ready, Reconciling and
// Stalled conditions and its final phase are decided, from what the steps
// found (state.outcome): after the steps and before every status write
// (checkpoints included). A pass that found nothing new leaves them as
// stored. The phase machine itself (Pending … CuttingOver) is the table in
// phases(); the facts of each phase (Prechecked, Copied, Verified, CutOver)
// are recorded by the handler that learned them.
func summarize(p *pass, err error) error {
	o, mj := p.State.outcome, p.Obj
	if o == nil {
		return err
	}
	switch o.kind {
	case outcomeRunning, outcomeAborting:
		conditions.MarkReconciling(mj, o.reason, o.msg)
	case outcomeAwaiting:
		conditions.MarkNotReady(mj, o.reason, o.msg)
	case outcomeFailed, outcomeSucceeded:
		if !mj.Finished() {
			now := metav1.Now()
			mj.Status.CompletionTime = &now
		}
		if o.kind == outcomeFailed {
			mj.Status.Phase = migrationv1.PhaseFailed
			conditions.MarkStalled(mj, o.reason, o.msg)
		} else {
			mj.Status.Phase = migrationv1.PhaseSucceeded
			conditions.MarkReady(mj, o.reason, o.msg)
		}
	}
	return err
}
