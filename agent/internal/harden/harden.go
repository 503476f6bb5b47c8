// Package harden keeps the agent's secrets out of reach of the processes
// it starts. The agent's credentials (store keys, the database password,
// an encryption identity) come as environment variables of PID 1, set by
// the kubelet from Secrets; /proc/1/environ shows them to any process of
// the same user — a program run by a restore's temporary PostgreSQL server,
// the database tools — whatever the agent does to its own copy afterwards:
// os.Unsetenv changes the Go runtime's copy, never the memory the kernel
// reads /proc/<pid>/environ from (TestUnsetenvLeavesProcEnviron).
//
// Seal marks the agent not dumpable (prctl PR_SET_DUMPABLE 0): the kernel
// then lets only a process holding CAP_SYS_PTRACE read its
// /proc/<pid>/{environ,mem,fd/…} or ptrace it, and its /proc files belong
// to root. A process of the same user without that capability — every
// child of the agent's pod, which runs as a non-root user with no added
// capabilities — gets EACCES (TestSealedEnvironIsNotReadable). Children
// regain dumpability when they exec, so nothing changes for them; each
// gets an explicit, minimal environment anyway.
package harden
