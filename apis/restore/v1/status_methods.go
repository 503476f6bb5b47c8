package v1

// SetObservedGeneration records the generation acted on (libs/reconcile.Object).
func (r *RestoreJob) SetObservedGeneration(g int64) { r.Status.ObservedGeneration = g }

// GetPhase returns status.phase (libs/reconcile.Object).
func (r *RestoreJob) GetPhase() string { return string(r.Status.Phase) }
