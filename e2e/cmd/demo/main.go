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
// MigrationJob over (migration.go), and leaves everything running. `demo
// down` stops it. State lives in --state (e2e/.state).
//
//	go run ./e2e/cmd/demo up --state e2e/.state
//	go run ./e2e/cmd/demo down --state e2e/.state
//	(`demo plane --state DIR` is the data-plane process `up` starts and `down` stops.)
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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

func up(dir string, timeout time.Duration) (err error) {
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
	var timing []string
	for _, p := range smp.pairs {
		timing = append(timing, fmt.Sprintf("%s backed up %s after the samples were applied, restored %s later", p.backup.GetName(),
			p.backedUp.Sub(applied).Round(time.Second), p.restored.Sub(p.backedUp).Round(time.Second)))
	}
	timing = append(timing, fmt.Sprintf("point-in-time step %s", pitTook.Round(time.Second)))
	fmt.Printf("\nCairn demo is running (up in %s: platform %s, cluster %s; %s).\n",
		time.Since(begin).Round(time.Second), platformUp.Round(100*time.Millisecond), env.Cluster.Started.Round(100*time.Millisecond),
		strings.Join(timing, "; "))
	fmt.Printf("  export KUBECONFIG=%s\n", env.Cluster.Kubeconfig)
	fmt.Printf("  operator logs: kubectl -n cairn-system logs deploy/cairn-backup-controller-manager (restore, migration, orchestrator alike); data plane (servers, pod runner): %s/plane.log\n", dir)
	fmt.Printf("  stop it with: make demo-down\n")
	return nil
}

// samples are the objects of platform/samples — what README tells a user to
// start from — as the demo applies them.
type samples struct {
	secrets []*unstructured.Unstructured
	// grants are the RoleBindings of the samples (the migration operator's
	// right to switch Secrets in the sample namespace), applied first.
	grants []*unstructured.Unstructured
	// pairs are the sample BackupJobs (PostgreSQL first, then MariaDB), each
	// with the sample RestoreJob that restores it.
	pairs []*pair
	// plan is the sample ProtectionPlan (its own BackupJob, prefix and
	// scratch database), applied beside the BackupJobs.
	plan *unstructured.Unstructured
	// migration is the sample MigrationJob, its target mapped to a second
	// database on the local PostgreSQL; applied with the others, cut over
	// once the restores and the plan's verification are shown.
	migration *unstructured.Unstructured
	// pitr is the sample BackupJob with spec.pointInTime (PostgreSQL: the
	// orders database again) and the sample RestoreJob to a time of it;
	// the BackupJob is applied with the others (its archiver starts at
	// once), the RestoreJob by the point-in-time step (pitr.go).
	pitr *pair
}

// pair is a sample BackupJob and the sample RestoreJob of its newest backup.
type pair struct {
	backup, restore *unstructured.Unstructured
	// What the demo saw happen: the first backup recorded Succeeded (and the
	// RestoreJob applied), the restore Succeeded.
	backedUp, restored time.Time
}

func (p *pair) engine() string {
	e, _, _ := unstructured.NestedString(p.backup.Object, "spec", "database", "engine")
	return e
}

// demoSchedule replaces the sample BackupJobs' nightly schedule, so that the
// first backups run within a minute (all in the same minute).
const demoSchedule = "* * * * *"

func readSamples(root string) (*samples, error) {
	files, err := filepath.Glob(filepath.Join(root, "platform", "samples", "*.yaml"))
	if err != nil {
		return nil, err
	}
	// The namespace admin's grants the samples need (switchSecret's opt-in).
	grants, err := filepath.Glob(filepath.Join(root, "platform", "samples", "grants", "*.yaml"))
	if err != nil {
		return nil, err
	}
	files = append(files, grants...)
	s := &samples{}
	var backups, restores []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			o := &unstructured.Unstructured{}
			if err := r.Decode(&o.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			switch o.GetKind() {
			case "":
				continue
			case "Secret":
				s.secrets = append(s.secrets, o)
			case "RoleBinding":
				s.grants = append(s.grants, o) // grants/migration-grant.yaml: switchSecret's opt-in
			case "BackupJob":
				backups = append(backups, o)
			case "RestoreJob":
				restores = append(restores, o)
			case "ProtectionPlan":
				s.plan = o
			case "MigrationJob":
				s.migration = o
			default:
				return nil, fmt.Errorf("%s: unexpected %s in the samples", f, o.GetKind())
			}
		}
	}
	for _, bj := range backups {
		p := &pair{backup: bj}
		_, pit, _ := unstructured.NestedMap(bj.Object, "spec", "pointInTime")
		for _, rj := range restores {
			src, _, _ := unstructured.NestedString(rj.Object, "spec", "source", "backupJob", "name")
			if src == bj.GetName() && rj.GetNamespace() == bj.GetNamespace() {
				p.restore = rj
			}
		}
		if p.restore == nil {
			return nil, fmt.Errorf("platform/samples has no RestoreJob of BackupJob %s", bj.GetName())
		}
		if pit {
			// Its schedule stays nightly: the demo asks for its one base.
			if s.pitr != nil {
				return nil, fmt.Errorf("platform/samples has two BackupJobs with spec.pointInTime (%s, %s): the demo runs one archiver",
					s.pitr.backup.GetName(), bj.GetName())
			}
			if err := unstructured.SetNestedField(bj.Object, demoMaxSegmentAge, "spec", "pointInTime", "maxSegmentAge"); err != nil {
				return nil, err
			}
			s.pitr = p
			continue
		}
		if err := unstructured.SetNestedField(bj.Object, demoSchedule, "spec", "schedule"); err != nil {
			return nil, err
		}
		s.pairs = append(s.pairs, p)
	}
	sort.SliceStable(s.pairs, func(i, j int) bool {
		return s.pairs[i].engine() == "postgres" && s.pairs[j].engine() != "postgres"
	})
	engines := map[string]bool{}
	for _, p := range s.pairs {
		engines[p.engine()] = true
	}
	if !engines["postgres"] || !engines["mysql"] || s.plan == nil || s.migration == nil || s.pitr == nil {
		return nil, errors.New("platform/samples lacks the PostgreSQL or the MariaDB BackupJob (with its RestoreJob), the point-in-time BackupJob (with its RestoreJob), the ProtectionPlan or the MigrationJob")
	}
	if err := unstructured.SetNestedField(s.plan.Object, demoSchedule, "spec", "backup", "schedule"); err != nil {
		return nil, err
	}
	return s, nil
}

func apply(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("cairn-demo"), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func applySamples(ctx context.Context, c client.Client, s *samples) error {
	objs := append(append([]*unstructured.Unstructured{}, s.grants...), s.secrets...)
	var names []string
	runNow := "demo-" + strconv.FormatInt(time.Now().Unix(), 10)
	for _, p := range s.pairs {
		// The first backup runs now (a run-now request), not at the next
		// minute: the schedule goes on every minute from there.
		ann := p.backup.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[backupv1.RunNowAnnotation] = runNow
		p.backup.SetAnnotations(ann)
		objs = append(objs, p.backup)
		names = append(names, p.backup.GetNamespace()+"/"+p.backup.GetName())
	}
	for _, o := range append(objs, s.plan, s.migration, s.pitr.backup) {
		if err := apply(ctx, c, o); err != nil {
			return err
		}
	}
	tz, _, _ := unstructured.NestedString(s.pairs[0].backup.Object, "spec", "timeZone")
	logf("applied platform/samples: the Secrets, MigrationJob %s/%s, BackupJobs %s and ProtectionPlan %s/%s, their schedules set to %q (every minute) in %s; first backups requested now (%s=%s)",
		s.migration.GetNamespace(), s.migration.GetName(), strings.Join(names, ", "), s.plan.GetNamespace(), s.plan.GetName(), demoSchedule, tz, backupv1.RunNowAnnotation, runNow)
	logf("applied BackupJob %s/%s with spec.pointInTime (maxSegmentAge set to %s for the demo): its archiver starts now, its base comes later",
		s.pitr.backup.GetNamespace(), s.pitr.backup.GetName(), demoMaxSegmentAge)
	return requestPlanRun(ctx, c, s.plan, runNow)
}

// requestPlanRun asks the plan's BackupJob (the orchestrator creates it,
// named after the plan) for a run now, as applySamples does for the sample
// BackupJobs. The orchestrator leaves annotations it does not set alone.
// Without it the plan's first backup comes at the next minute.
func requestPlanRun(ctx context.Context, c client.Client, plan *unstructured.Unstructured, id string) error {
	key := client.ObjectKey{Namespace: plan.GetNamespace(), Name: plan.GetName()}
	bj := &backupv1.BackupJob{}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, bj)
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return fmt.Errorf("waiting for protectionplan/%s's BackupJob: %w", key.Name, err)
	}
	patch := client.MergeFrom(bj.DeepCopy())
	if bj.Annotations == nil {
		bj.Annotations = map[string]string{}
	}
	bj.Annotations[backupv1.RunNowAnnotation] = id
	return c.Patch(ctx, bj, patch)
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
