package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"cairn.dev/agent/testservers"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/install"
)

// The demo's data plane — PostgreSQL, MariaDB, S3 and the pod runner — runs
// in a process of its own (`demo plane`), started detached by `demo up`, so
// it outlives `up` like the operators do; `demo down` stops it (SIGTERM: the
// pod runner stops its containers, the servers stop and remove their data).

// planeFile is where the plane process says it is up.
const planeFile = "plane.json"

// planeState is what the plane process writes once it is up.
type planeState struct {
	Pid        int
	Postgres   *testservers.Postgres
	MariaDB    *testservers.MariaDB
	S3Endpoint string
	Runtime    string
}

// plane runs the data plane until SIGTERM or SIGINT.
func plane(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	plogf := func(f string, a ...any) { fmt.Printf(time.Now().Format("15:04:05 ")+f+"\n", a...) }
	servers, err := install.StartServers(plogf)
	if err != nil {
		return err
	}
	defer servers.Stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kwok", "kubeconfig"))
	if err != nil {
		return err
	}
	runner, err := cluster.StartPodRunner(ctx, cfg, dir, "", plogf)
	if err != nil {
		return err
	}
	defer func() {
		if err := runner.Stop(); err != nil {
			plogf("stopping the pod runner: %v", err)
		}
	}()
	st := planeState{Pid: os.Getpid(), Postgres: servers.Postgres, MariaDB: servers.MariaDB, S3Endpoint: servers.S3.Endpoint(), Runtime: runner.Runtime}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, planeFile+".tmp"), b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, planeFile+".tmp"), filepath.Join(dir, planeFile)); err != nil {
		return err
	}
	plogf("data plane up; waiting for SIGTERM")
	<-ctx.Done()
	plogf("stopping")
	return nil
}

// startPlane starts `demo plane` detached and waits until it is up.
func startPlane(ctx context.Context, dir string) (*planeState, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "plane.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "plane", "--state", dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, planeFile)); err == nil {
			st := &planeState{}
			if err := json.Unmarshal(b, st); err != nil {
				return nil, err
			}
			return st, nil
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("the data plane process ended (%v):\n%s", err, out)
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return nil, fmt.Errorf("the data plane did not come up in 3 minutes (log %s)", logPath)
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopPlane sends SIGTERM to the plane process and waits (up to a minute)
// until it ended.
func stopPlane(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, planeFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st := &planeState{}
	if err := json.Unmarshal(b, st); err != nil {
		return err
	}
	if err := syscall.Kill(st.Pid, syscall.SIGTERM); err != nil {
		return nil // gone already
	}
	for i := 0; i < 600; i++ {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", st.Pid))
		if err != nil || strings.Contains(string(raw), ") Z ") {
			logf("stopped the data plane (pid %d): servers and pod runner", st.Pid)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the data plane (pid %d) did not stop within a minute", st.Pid)
}
