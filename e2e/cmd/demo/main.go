// Command demo starts Cairn on a local control plane (kwok for kubelets) with
// the backup and restore operators as local processes, applies a sample
// BackupJob that runs every minute in Asia/Shanghai, shows its progress until
// the first backup ran and a restore of it succeeded, and leaves everything
// running. `demo down` stops it. State lives in --state (e2e/.state).
//
//	go run ./e2e/cmd/demo up --state e2e/.state
//	go run ./e2e/cmd/demo down --state e2e/.state
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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/platform"
)

const (
	clusterName = "cairn-demo"
	namespace   = "cairn-demo"
)

func main() {
	ctrllog.SetLogger(logr.Discard())
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	state := fs.String("state", "e2e/.state", "Folder for the demo's state: kubeconfig, logs, binaries, the cluster's files.")
	timeout := fs.Duration("timeout", 5*time.Minute, "How long `up` waits for the first backup and restore.")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [--state DIR]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	dir, err := filepath.Abs(*state)
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(dir, *timeout)
		case "down":
			err = down(dir)
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

func up(dir string, timeout time.Duration) (err error) {
	begin := time.Now()
	if _, err := os.Stat(filepath.Join(dir, "pids")); err == nil {
		return fmt.Errorf("a demo is already running (state in %s): run `make demo-down` first", dir)
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// Always rebuild: the Go build cache makes it quick when nothing changed.
	bin := filepath.Join(dir, "bin")
	for _, op := range []string{"backup", "restore"} {
		start := time.Now()
		if _, err := platform.Build(ctx, root, bin, op); err != nil {
			return err
		}
		logf("built the %s operator in %s", op, time.Since(start).Round(time.Millisecond))
	}
	env, err := platform.Up(ctx, platform.Options{Root: root, Dir: dir, BinDir: bin, Nodes: 2, ClusterName: clusterName,
		Operators: []string{"backup", "restore"}, Webhooks: true, Detach: true, Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			logf("stopping everything: %v", err)
			_ = env.Down()
			_ = os.Remove(filepath.Join(dir, "pids"))
		}
	}()
	var pids []string
	for _, op := range env.Operators {
		pids = append(pids, strconv.Itoa(op.Cmd.Process.Pid))
	}
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(strings.Join(pids, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	platformUp := time.Since(begin)
	if err := applySamples(ctx, env.Client); err != nil {
		return err
	}
	applied := time.Now()
	firstBackup, restored, err := watch(ctx, env.Client, timeout)
	if err != nil {
		return err
	}
	fmt.Printf("\nCairn demo is running (up in %s: platform %s, cluster %s; first backup %s after the sample was applied, restore %s later).\n",
		time.Since(begin).Round(time.Second), platformUp.Round(100*time.Millisecond), env.Cluster.Started.Round(100*time.Millisecond),
		firstBackup.Sub(applied).Round(time.Second), restored.Sub(firstBackup).Round(time.Second))
	fmt.Printf("  export KUBECONFIG=%s\n", env.Cluster.Kubeconfig)
	fmt.Printf("  operator logs: %s/{backup,restore}.log\n", dir)
	fmt.Printf("  stop it with: make demo-down\n")
	return nil
}

func applySamples(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders-db"},
			StringData: map[string]string{"username": "orders", "password": "demo-only"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "backup-bucket"},
			StringData: map[string]string{"accessKeyID": "demo", "secretAccessKey": "demo-only"}},
		&backupv1.BackupJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders"},
			Spec: backupv1.BackupJobSpec{
				Database: cairnv1.DatabaseRef{Engine: "postgres", Host: "orders-db.example", Port: 5432, Database: "orders",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db"}},
				Schedule: "* * * * *", TimeZone: "Asia/Shanghai", RetentionDays: 7,
				MaxRetries: ptr.To[int32](2), ActiveDeadlineSeconds: ptr.To[int64](600),
				Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "http://s3.example:9000", Bucket: "backups",
					Region: "us-east-1", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "backup-bucket"}}},
				DeletionPolicy: backupv1.DeletionPolicyRetain,
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("applying %T %s: %w", o, o.GetName(), err)
		}
	}
	logf("applied the sample: BackupJob %s/orders, every minute in Asia/Shanghai", namespace)
	return nil
}

// watch shows the BackupJob (and then the RestoreJob) until a backup ran and
// its restore succeeded.
func watch(ctx context.Context, c client.Client, timeout time.Duration) (time.Time, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tty := isTerminal()
	var firstBackup time.Time
	last := ""
	for {
		bj := &backupv1.BackupJob{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "orders"}, bj); err != nil {
			return firstBackup, time.Time{}, err
		}
		rj := &restorev1.RestoreJob{}
		rerr := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "orders-restore"}, rj)
		if bj.Status.LastResult == backupv1.RunSucceeded && firstBackup.IsZero() {
			firstBackup = time.Now()
			rj = &restorev1.RestoreJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders-restore"},
				Spec: restorev1.RestoreJobSpec{
					Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders"}},
					Target: cairnv1.DatabaseRef{Engine: "postgres", Host: "scratch-db.example", Port: 5432, Database: "orders",
						CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db"}},
					MaxRetries: ptr.To[int32](1), ActiveDeadlineSeconds: ptr.To[int64](600),
				},
			}
			if err := c.Create(ctx, rj); err != nil && !apierrors.IsAlreadyExists(err) {
				return firstBackup, time.Time{}, err
			}
			rerr = nil
		}
		table := render(bj, rj, rerr == nil)
		if table != last {
			if tty && last != "" {
				fmt.Printf("\033[%dA\033[J", strings.Count(last, "\n"))
			}
			fmt.Print(table)
			last = table
		}
		if rerr == nil && rj.Status.Phase == restorev1.PhaseSucceeded {
			return firstBackup, time.Now(), nil
		}
		if rerr == nil && rj.Status.Phase == restorev1.PhaseFailed {
			return firstBackup, time.Time{}, errors.New("the restore failed: see restore.log")
		}
		select {
		case <-ctx.Done():
			return firstBackup, time.Time{}, fmt.Errorf("waiting for the first backup and restore: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func render(bj *backupv1.BackupJob, rj *restorev1.RestoreJob, haveRestore bool) string {
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
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-10s %-12s %-10s %-12s %s\n", "RESOURCE", "PHASE", "LAST BACKUP", "NEXT RUN", "LAST RESULT", "ARTIFACT")
	art := "-"
	if bj.Status.LastArtifact != nil {
		art = bj.Status.LastArtifact.Path
	}
	fmt.Fprintf(&b, "%-24s %-10s %-12s %-10s %-12s %s\n", "backupjob/orders", or(string(bj.Status.Phase), "-"),
		ts(bj.Status.LastBackupTime), ts(bj.Status.NextScheduleTime), or(string(bj.Status.LastResult), "-"), art)
	if haveRestore {
		art = "-"
		if rj.Status.Artifact != nil {
			art = rj.Status.Artifact.Path
		}
		fmt.Fprintf(&b, "%-24s %-10s %-12s %-10s %-12s %s\n", "restorejob/orders-restore", or(string(rj.Status.Phase), "-"),
			"", "", "", art)
	}
	return b.String()
}

func isTerminal() bool {
	fi, err := os.Stdout.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func down(dir string) error {
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
