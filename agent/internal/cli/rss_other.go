//go:build !linux

package cli

func peakRSSKiB() int64 { return -1 }
