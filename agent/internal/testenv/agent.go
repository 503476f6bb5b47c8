package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"cairn.dev/agent/contract"
)

// Run is the outcome of one agent run.
type Run struct {
	Args    []string
	Code    int
	Stdout  string
	Stderr  string
	TermLog string
	// PeakRSSKiB is the agent's own peak RSS as it logged it, or -1.
	PeakRSSKiB int64
	Elapsed    time.Duration
	// CPU is the user + system time of the agent and the tools it ran
	// (the children it waited for).
	CPU time.Duration
}

// Result parses the termination message.
func (r Run) Result() (*contract.Result, error) { return contract.Parse(r.TermLog) }

// Agent runs an agent binary with a fixed environment.
type Agent struct {
	Bin string
	// Env is the base environment (KEY=value); PATH is added if absent.
	Env []string
	// Dir holds termination logs.
	Dir string
}

// Command prepares an agent process; extra environment entries override Env.
// The caller starts it; the termination log is returned for reading.
func (a *Agent) Command(ctx context.Context, extraEnv []string, args ...string) (*exec.Cmd, string, error) {
	f, err := os.CreateTemp(a.Dir, "termination-log-")
	if err != nil {
		return nil, "", err
	}
	f.Close()
	env := map[string]string{}
	order := []string{}
	for _, kv := range append(append(append([]string{}, a.Env...), "CAIRN_TERMINATION_LOG="+f.Name()), extraEnv...) {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := env[k]; !seen {
			order = append(order, k)
		}
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		order = append(order, "PATH")
		env["PATH"] = os.Getenv("PATH")
	}
	list := make([]string, 0, len(order))
	for _, k := range order {
		list = append(list, k+"="+env[k])
	}
	cmd := exec.CommandContext(ctx, a.Bin, args...)
	cmd.Env = list
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, f.Name(), nil
}

// Run runs the agent to completion (at most 10 minutes).
func (a *Agent) Run(extraEnv []string, args ...string) Run {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd, termLog, err := a.Command(ctx, extraEnv, args...)
	r := Run{Args: args, Code: -1, PeakRSSKiB: -1}
	if err != nil {
		r.Stderr = err.Error()
		return r
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r.Elapsed = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		r.CPU = ps.UserTime() + ps.SystemTime()
	}
	r.ended(err, out.String(), errb.String(), termLog)
	os.Remove(termLog)
	return r
}

// ended records how a finished agent process (or container) ended: its
// output, exit code, termination log and peak RSS.
func (r *Run) ended(err error, stdout, stderr, termLog string) {
	r.Stdout, r.Stderr = stdout, stderr
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		r.Code = 0
	case errors.As(err, &exitErr):
		r.Code = exitErr.ExitCode()
	default:
		r.Stderr += "\n" + err.Error()
	}
	if b, err := os.ReadFile(termLog); err == nil {
		r.TermLog = string(b)
	}
	r.PeakRSSKiB = parsePeakRSS(r.Stderr)
}

func parsePeakRSS(logs string) int64 {
	var v int64 = -1
	for _, f := range strings.Fields(logs) {
		if s, ok := strings.CutPrefix(f, "peakRSSKiB="); ok {
			var n int64
			for _, c := range s {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int64(c-'0')
			}
			v = n
		}
	}
	return v
}
