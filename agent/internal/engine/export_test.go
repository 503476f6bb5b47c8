package engine

import "time"

// SetCreateTimeout sets how long a stopped restore's CREATE DATABASE may
// run on, and returns a func that puts the default back.
func SetCreateTimeout(d time.Duration) (restore func()) {
	old := createTimeout
	createTimeout = d
	return func() { createTimeout = old }
}
