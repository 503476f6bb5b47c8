//go:build !linux

package engine

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
