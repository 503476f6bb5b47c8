package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the status conditions (libs/conditions.Object).
func (p *ProtectionPlan) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions (libs/conditions.Object).
func (p *ProtectionPlan) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// SetObservedGeneration records the generation acted on (libs/reconcile.Object).
func (p *ProtectionPlan) SetObservedGeneration(g int64) { p.Status.ObservedGeneration = g }

// GetPhase returns status.phase (libs/reconcile.Object).
func (p *ProtectionPlan) GetPhase() string { return string(p.Status.Phase) }
