//go:build !linux

package engine

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func growPipe(*os.File) {}
