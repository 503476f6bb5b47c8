package engine

import "syscall"

// A tool must not outlive the agent: if the agent is killed mid-stream, its
// dump tool is killed too instead of hanging on a pipe or a socket.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
