package suite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/result"
)

// ScratchDroppedWhenInterrupted stops (SIGTERM, as the kubelet does when
// its pod is deleted — the RestoreJob's or the whole namespace's deletion)
// a verification restore into a scratch database it created, while it
// loads the dump: the agent drops the scratch database before it exits,
// and its failure message says so (issue 30). Before, the half-restored
// database stayed on the server.
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

	env := append(append(append(append([]string{}, e.DB.AgentEnv(scratch)...), st.Env...), "CAIRN_BACKUPJOB="+job.String()),
		checksEnv(t, []result.Check{{Name: "rows", RowCountsMatchBackup: true}}, true)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd, termLog, err := e.Agent.Command(ctx, env, "restore")
	check(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	check(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Stop it as soon as it created the scratch database (it then loads
	// the dump for a few seconds).
	err = testenv.Poll(2*time.Minute, 20*time.Millisecond, func() error {
		select {
		case err := <-exited:
			exited <- err
			return nil
		default:
		}
		if !dbExists(t, e, scratch) {
			return errors.New("no scratch database yet")
		}
		return nil
	})
	check(t, err)
	check(t, cmd.Process.Signal(syscall.SIGTERM))
	werr := <-exited
	if werr == nil {
		t.Fatalf("the restore finished before it was stopped (seed a bigger source): %s", stderr.String())
	}
	r := testenv.Run{Args: []string{"restore"}, Code: cmd.ProcessState.ExitCode(), Stderr: stderr.String(), TermLog: string(must(os.ReadFile(termLog)))}
	reason := mustFail(t, r, result.ScratchDropped, scratch)
	if strings.Contains(reason, result.ScratchNotDropped) {
		t.Errorf("failure %q says the scratch database was not dropped", reason)
	}
	if dbExists(t, e, scratch) {
		t.Errorf("the stopped restore's scratch database %s is still there", scratch)
	}
	t.Logf("stopped restore: %s", reason)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
