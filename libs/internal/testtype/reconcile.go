package testtype

// SetObservedGeneration records the generation acted on (libs/reconcile.Object).
func (w *Widget) SetObservedGeneration(g int64) { w.Status.ObservedGeneration = g }

// GetPhase returns status.note, which stands for a phase in tests
// (libs/reconcile.Object).
func (w *Widget) GetPhase() string { return w.Status.Note }
