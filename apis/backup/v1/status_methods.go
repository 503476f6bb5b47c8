package v1

// SetObservedGeneration records the generation acted on (libs/reconcile.Object).
func (b *BackupJob) SetObservedGeneration(g int64) { b.Status.ObservedGeneration = g }

// GetPhase returns status.phase (libs/reconcile.Object).
func (b *BackupJob) GetPhase() string { return string(b.Status.Phase) }
