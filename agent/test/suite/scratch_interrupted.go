package suite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// ScratchDroppedWhenInterrupted stops (SIGTERM, as the kubelet does when
// its pod is deleted — the RestoreJob's or the whole namespace's deletion)
// a verification restore into a scratch database it created, while it
// loads the dump, and again while a (slow) check runs: each time the agent
// drops the scratch database before it exits, and its failure message says
// so (issue 30). Before, the half-restored database stayed on the server,
// and a stop during the checks ended with exit 0 and the database kept.
func ScratchDroppedWhenInterrupted(t *testing.T, e *Env, kind string) {
	st := e.NewStore(t, kind)
	src, scratch := "intr_src_"+kind, "intr_scratch_"+kind
	job := naming.Job{Namespace: "shop", Name: "interrupted-" + kind}
	check(t, e.DB.Seed(src))
	check(t, e.DB.SeedBig(src, 48))
	t.Cleanup(func() {
		e.DB.Drop(src)
		e.DB.Drop(scratch)
	})
	mustSucceed(t, e.agent(t, st, src, job, nil, "backup"))
	if dbExists(t, e, scratch) {
		t.Fatalf("%s exists before the test", scratch)
	}

	rows := []contract.Check{{Name: "rows", RowCountsMatchBackup: true}}
	stopRestore(t, e, st, job, scratch, rows, "the restore loads the dump")
	sleep := "SELECT count(*) FROM (SELECT pg_sleep(120)) s"
	if e.DB.Engine() != "postgres" {
		sleep = "SELECT SLEEP(120)"
	}
	stopRestore(t, e, st, job, scratch, append(rows, contract.Check{Name: "slow", SQL: sleep, AtLeast: ptr(int64(0))}), "a check runs")
}

// stopRestore starts a verification restore of job into scratch with
// checks, SIGTERMs it once the scratch database exists (and, when the
// checks hold a slow one, once the restore is done: its log says
// "restore finished"), and checks that it dropped the database and said so.
func stopRestore(t *testing.T, e *Env, st *Store, job naming.Job, scratch string, cs []contract.Check, while string) {
	t.Helper()
	env := append(append(append(append([]string{}, e.DB.AgentEnv(scratch)...), st.Env...), "CAIRN_BACKUPJOB="+job.String()),
		checksEnv(t, cs, true)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, termLog, err := e.Agent.Command(ctx, env, "restore")
	check(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	inChecks := len(cs) > 1
	err = testenv.Poll(2*time.Minute, 20*time.Millisecond, func() error {
		select {
		case err := <-exited:
			exited <- err
			return nil
		default:
		}
		if !dbExists(t, e, scratch) || inChecks && !strings.Contains(stderr.String(), "restore finished") {
			return errors.New("not there yet")
		}
		return nil
	})
	check(t, err)
	check(t, cmd.Process.Signal(syscall.SIGTERM))
	werr := <-exited
	if werr == nil {
		t.Fatalf("the restore finished before it was stopped while %s: %s", while, stderr.String())
	}
	r := testenv.Run{Args: []string{"restore"}, Code: cmd.ProcessState.ExitCode(), Stderr: stderr.String(), TermLog: string(must(os.ReadFile(termLog)))}
	reason := mustFail(t, r, contract.ScratchDropped, scratch)
	if strings.Contains(reason, contract.ScratchNotDropped) {
		t.Errorf("stopped while %s: failure %q says the scratch database was not dropped", while, reason)
	}
	if dbExists(t, e, scratch) {
		t.Errorf("stopped while %s: the scratch database %s is still there", while, scratch)
	}
	t.Logf("stopped while %s: %s", while, reason)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
