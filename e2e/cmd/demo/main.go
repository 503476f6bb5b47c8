// Command demo starts Cairn on a local control plane — the platform
// installed from `kustomize build platform`, the operators as local
// processes, agent pods run as real containers of the agent image on the pod
// runner's node — with a real PostgreSQL 15, MariaDB and S3 server
// (versitygw) on loopback ports. It creates the sample `orders` database with
// real rows on both servers, applies platform/samples mapped to those servers
// (the BackupJobs' schedules set to every minute in Asia/Shanghai, and a
// run-now request on each so the first backups start at once), applies each sample RestoreJob
// after its BackupJob's first backup, shows progress until both restores
// succeeded, prints per engine the artifact (name, size, checksum, checked
// against the stored object) and the source and restored tables side by
// side, then waits for the sample ProtectionPlan (applied with the
// BackupJobs) to verify its first backup — a restore into its scratch
// database, the checks, the drop — prints its conditions, measured restore
// duration and check results, then shows point-in-time recovery on the
// sample BackupJob with spec.pointInTime (PostgreSQL; its archiver started
// with the samples): a base, orders A and B written and A deleted, the sample
// RestoreJob to the second between B and the delete, and the source's and
// the restored database's rows side by side (pitr.go); then cuts the sample
// MigrationJob over (migration.go), shows a ProtectionPlan's measured
// recovery time with one stream and then in parallel on a sizable database
// (rto.go; --rto-mb, 0 skips it), and leaves everything running. `demo
// down` stops it. State lives in --state (e2e/.state).
//
//	go run ./e2e/cmd/demo up --state e2e/.state
//	go run ./e2e/cmd/demo down --state e2e/.state
//	(`demo plane --state DIR` is the data-plane process `up` starts and `down` stops.)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/install"
)

const clusterName = "cairn-demo"

func main() {
	ctrllog.SetLogger(logr.Discard())
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	state := fs.String("state", "e2e/.state", "Folder for the demo's state: kubeconfig, logs, binaries, the cluster's files.")
	timeout := fs.Duration("timeout", 5*time.Minute, "How long `up` waits for the first backup and restore (and for each of the recovery-time step's backups and verifications).")
	rtoMB := fs.Int("rto-mb", 0, "Size in MB of the recovery-time step's database (a ProtectionPlan's measured RTO with one stream, then in parallel); 0 skips the step.")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [--state DIR]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	dir, err := filepath.Abs(*state)
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(dir, *timeout, *rtoMB)
		case "down":
			err = down(dir)
		case "plane":
			err = plane(dir)
		default:
			err = fmt.Errorf("unknown command %q: up or down", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func logf(f string, a ...any) { fmt.Printf("demo: "+f+"\n", a...) }

func up(dir string, timeout time.Duration, rtoMB int) (err error) {
	begin := time.Now()
	if _, err := os.Stat(filepath.Join(dir, "pids")); err == nil {
		return fmt.Errorf("a demo is already running (state in %s): run `make demo-down` first", dir)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	smp, err := readSamples(root)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// The platform as it ships: its Deployments from a local overlay, the
	// operators' pods — two replicas each, images from `make images` — on
	// the pod runner the data plane process runs.
	env, err := install.Up(ctx, install.Options{Root: root, Dir: dir, Nodes: 1, ClusterName: clusterName,
		RealData: true, ExternalData: true, Installed: true, Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logf("stopping everything: %v", err)
			_ = stopPlane(dir)
			_ = env.Down()
			_ = os.Remove(filepath.Join(dir, "pids"))
		}
	}()
	planeStart := time.Now()
	pl, err := startPlane(ctx, dir)
	if err != nil {
		return err
	}
	logf("data plane up in %s (pid %d, log %s/plane.log): PostgreSQL 15 on 127.0.0.1:%d, MariaDB on 127.0.0.1:%d, S3 on %s; agent pods run as %s",
		time.Since(planeStart).Round(time.Millisecond), pl.Pid, dir, pl.Postgres.Port, pl.MariaDB.Port, pl.S3Endpoint, pl.Runtime)
	if err := env.WaitOperators(ctx); err != nil {
		return err
	}
	if err := seed(pl, smp); err != nil {
		return err
	}
	if err := mapSamples(smp, pl); err != nil {
		return err
	}
	// No operator process of ours: the operators are pods of the plane's
	// pod runner. The file marks a running demo.
	if err := os.WriteFile(filepath.Join(dir, "pids"), nil, 0o644); err != nil {
		return err
	}
	platformUp := time.Since(begin)
	if err := applySamples(ctx, env.Client, smp); err != nil {
		return err
	}
	applied := time.Now()
	if err := watch(ctx, env.Client, smp, timeout); err != nil {
		return err
	}
	for _, p := range smp.pairs {
		if err := report(ctx, env.Client, pl, p); err != nil {
			return err
		}
	}
	if err := watchPlan(ctx, env.Client, smp, timeout); err != nil {
		return err
	}
	pitStart := time.Now()
	if err := runPointInTime(ctx, env.Client, pl, smp, timeout); err != nil {
		return err
	}
	pitTook := time.Since(pitStart)
	if err := runMigration(ctx, env.Client, pl, smp, timeout); err != nil {
		return err
	}
	rtoStart := time.Now()
	if err := runRTO(ctx, env.Client, pl, smp, rtoMB, timeout); err != nil {
		return err
	}
	rtoTook := time.Since(rtoStart)
	var timing []string
	for _, p := range smp.pairs {
		timing = append(timing, fmt.Sprintf("%s backed up %s after the samples were applied, restored %s later", p.backup.GetName(),
			p.backedUp.Sub(applied).Round(time.Second), p.restored.Sub(p.backedUp).Round(time.Second)))
	}
	timing = append(timing, fmt.Sprintf("point-in-time step %s", pitTook.Round(time.Second)))
	if rtoMB > 0 {
		timing = append(timing, fmt.Sprintf("recovery-time step %s", rtoTook.Round(time.Second)))
	}
	fmt.Printf("\nCairn demo is running (up in %s: platform %s, cluster %s; %s).\n",
		time.Since(begin).Round(time.Second), platformUp.Round(100*time.Millisecond), env.Cluster.Started.Round(100*time.Millisecond),
		strings.Join(timing, "; "))
	fmt.Printf("  export KUBECONFIG=%s\n", env.Cluster.Kubeconfig)
	fmt.Printf("  operator logs: kubectl -n cairn-system logs deploy/cairn-backup-controller-manager (restore, migration, orchestrator alike); data plane (servers, pod runner): %s/plane.log\n", dir)
	fmt.Printf("  stop it with: make demo-down\n")
	return nil
}

// watch shows the BackupJobs (and then their RestoreJobs) until each has
// backed up and its restore succeeded. A BackupJob's RestoreJob is applied
// once its first backup is recorded.
func watch(ctx context.Context, c client.Client, s *samples, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tty := isTerminal()
	last := ""
	for {
		var b strings.Builder
		header(&b)
		done := true
		for _, p := range s.pairs {
			bj := &backupv1.BackupJob{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: p.backup.GetNamespace(), Name: p.backup.GetName()}, bj); err != nil {
				return err
			}
			if bj.Status.LastResult == backupv1.RunSucceeded && p.backedUp.IsZero() {
				p.backedUp = time.Now()
				if err := apply(ctx, c, p.restore); err != nil {
					return err
				}
			}
			rj := &restorev1.RestoreJob{}
			rerr := c.Get(ctx, client.ObjectKey{Namespace: p.restore.GetNamespace(), Name: p.restore.GetName()}, rj)
			if rerr == nil && rj.Status.Phase == restorev1.PhaseSucceeded && p.restored.IsZero() {
				p.restored = time.Now()
			}
			if rerr == nil && rj.Status.Phase == restorev1.PhaseFailed {
				fmt.Print(b.String())
				return fmt.Errorf("restorejob/%s failed: see restore.log", rj.Name)
			}
			done = done && !p.restored.IsZero()
			render(&b, bj, rj, rerr == nil)
		}
		table := b.String()
		if table != last {
			if tty && last != "" {
				fmt.Printf("\033[%dA\033[J", strings.Count(last, "\n"))
			}
			fmt.Print(table)
			last = table
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the first backups and restores: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

const rowFormat = "%-34s %-10s %-12s %-10s %-12s %s\n"

func header(b *strings.Builder) {
	fmt.Fprintf(b, rowFormat, "RESOURCE", "PHASE", "LAST BACKUP", "NEXT RUN", "LAST RESULT", "ARTIFACT")
}

func render(b *strings.Builder, bj *backupv1.BackupJob, rj *restorev1.RestoreJob, haveRestore bool) {
	ts := func(t *metav1.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format("15:04:05")
	}
	or := func(s, d string) string {
		if s == "" {
			return d
		}
		return s
	}
	art := "-"
	if bj.Status.LastArtifact != nil {
		art = bj.Status.LastArtifact.Path
	}
	fmt.Fprintf(b, rowFormat, "backupjob/"+bj.Name, or(string(bj.Status.Phase), "-"),
		ts(bj.Status.LastBackupTime), ts(bj.Status.NextScheduleTime), or(string(bj.Status.LastResult), "-"), art)
	if haveRestore {
		art = "-"
		if rj.Status.Artifact != nil {
			art = rj.Status.Artifact.Path
		}
		fmt.Fprintf(b, rowFormat, "restorejob/"+rj.Name, or(string(rj.Status.Phase), "-"), "", "", "", art)
	}
}

func isTerminal() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func down(dir string) error {
	if err := stopPlane(dir); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.SIGTERM) == nil {
			logf("stopped operator pid %d", pid)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kwok", "clusters", clusterName)); err == nil {
		c, err := cluster.Existing(clusterName, filepath.Join(dir, "kwok"))
		if err != nil {
			return err
		}
		if err := c.Stop(); err != nil {
			return err
		}
		logf("deleted cluster %s", clusterName)
	}
	// Keep bin/ (warm starts); remove the rest.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "bin" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
