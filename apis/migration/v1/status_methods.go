package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the status conditions (libs/conditions.Object).
func (m *MigrationJob) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions (libs/conditions.Object).
func (m *MigrationJob) SetConditions(c []metav1.Condition) { m.Status.Conditions = c }

// SetObservedGeneration records the generation acted on (libs/reconcile.Object).
func (m *MigrationJob) SetObservedGeneration(g int64) { m.Status.ObservedGeneration = g }

// GetPhase returns status.phase (libs/reconcile.Object).
func (m *MigrationJob) GetPhase() string { return string(m.Status.Phase) }

// Finished reports whether the MigrationJob reached Succeeded or Failed.
func (m *MigrationJob) Finished() bool {
	return m.Status.Phase == PhaseSucceeded || m.Status.Phase == PhaseFailed
}

// Step returns the status record of step, or nil.
func (s *MigrationJobStatus) Step(step string) *StepStatus {
	for i := range s.Steps {
		if s.Steps[i].Step == step {
			return &s.Steps[i]
		}
	}
	return nil
}

// RemoteTarget reports whether the target is in another cluster.
func (t *TargetDatabase) RemoteTarget() bool { return t.KubeconfigSecretRef != nil }
