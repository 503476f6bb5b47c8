package engine

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A tool must not outlive the agent: if the agent is killed mid-stream, its
// dump tool is killed too instead of hanging on a pipe or a socket.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pipeSize is what growPipe asks for: the default pipe-max-size, which an
// unprivileged process may set.
const pipeSize = 1 << 20

// growPipe sets f's pipe buffer to pipeSize; a pipe it cannot grow
// (a lower pipe-max-size, the user's pipe quota) keeps its size.
func growPipe(f *os.File) {
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeSize)
}
