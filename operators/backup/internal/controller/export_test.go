package controller

// ForgetMetrics drops a BackupJob's metrics, as an operator restart does.
func ForgetMetrics(namespace, name string) { metrics.Forget(namespace, name) }
