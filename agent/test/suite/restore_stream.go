package suite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"cairn.dev/agent/contract"
	"cairn.dev/agent/internal/naming"
)

// RestoreStreamFails makes the restore stream fail after the artifact
// passed its check: the agent reads an artifact twice (verify, then
// restore), and here the second read — through a FIFO in place of the
// stored file on a PVC — yields other bytes: a truncated stream, a byte
// flipped midway, or a complete, valid dump of another state (the stored
// object changed between the two reads). The restore must fail as
// corrupted and the target must be exactly as before: on PostgreSQL the
// tool is killed inside its single transaction, never handed a clean end of
// input, so nothing it restored is committed.
func RestoreStreamFails(t *testing.T, e *Env) {
	st := e.NewStore(t, "pvc")
	dir := st.Env[1][len("CAIRN_PVC_PATH="):]
	db := "midstream_pvc"
	job := naming.Job{Namespace: "shop", Name: "midstream"}
	check(t, e.DB.Seed(db))
	t.Cleanup(func() { e.DB.Drop(db) })
	good := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	goodBytes := st.Read(t, st.KeyOf(t, job, good.Artifact))
	// Another valid dump, of a changed state, with more rows.
	check(t, e.DB.Mutate(db))
	check(t, e.DB.SeedBig(db, 2))
	other := mustSucceed(t, e.agent(t, st, db, job, nil, "backup"))
	otherBytes := st.Read(t, st.KeyOf(t, job, other.Artifact))
	file := filepath.Join(dir, filepath.FromSlash(st.KeyOf(t, job, good.Artifact)))

	flipped := append([]byte{}, goodBytes...)
	flipped[len(flipped)/2] ^= 0xff
	cases := []struct {
		name   string
		second []byte
	}{
		{"truncated at half", goodBytes[:len(goodBytes)/2]},
		{"truncated before the last byte", goodBytes[:len(goodBytes)-1]},
		{"byte flipped midway", flipped},
		{"another valid dump", otherBytes},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The target: the live database, changed since both backups.
			check(t, e.DB.Mutate(db))
			before := fingerprint(t, e.DB, db)

			check(t, os.Remove(file))
			check(t, syscall.Mkfifo(file, 0o600))
			served := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { served <- serveFIFO(ctx, file, goodBytes, tc.second) }()

			// Over the database the backup was taken of: allowed explicitly.
			r := e.agent(t, st, db, job, []string{"CAIRN_ARTIFACT=" + good.Artifact, contract.EnvAllowOverwriteSource + "=true"}, "restore")
			mustFail(t, r, "corrupted")
			mustExit(t, r, contract.ExitCorrupted)
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("serving the artifact: %v", err)
			}
			if after := fingerprint(t, e.DB, db); after != before {
				t.Fatalf("a restore whose stream failed changed the target.\nbefore:\n%s\nafter:\n%s", before, after)
			}
			// Put the real artifact back.
			check(t, os.Remove(file))
			check(t, os.WriteFile(file, goodBytes, 0o640))
		})
	}
}

// serveFIFO writes first to the first reader of the FIFO at name and second
// to the next one.
func serveFIFO(ctx context.Context, name string, first, second []byte) error {
	for i, data := range [][]byte{first, second} {
		f, err := openWriterCtx(ctx, name)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		f.Close()
		if err != nil && !isEPIPE(err) {
			return err
		}
		if i == 0 {
			// Wait until the first reader has gone, so that the second
			// write reaches the next open.
			if err := waitNoReader(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitNoReader returns once the FIFO has no reader.
func waitNoReader(ctx context.Context, name string) error {
	for {
		f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if isENXIO(err) {
			return nil
		}
		if err != nil {
			return err
		}
		f.Close()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// openWriterCtx opens a FIFO for writing, waiting for a reader until ctx
// ends (polling: a blocking open cannot be cancelled).
func openWriterCtx(ctx context.Context, name string) (*os.File, error) {
	for {
		f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			// Back to blocking writes.
			if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !isENXIO(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func isENXIO(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.ENXIO
}

func isEPIPE(err error) bool {
	pe, ok := err.(*os.PathError)
	return ok && pe.Err == syscall.EPIPE
}
