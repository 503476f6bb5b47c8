package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/kubectl-cairn/internal/view"
	"cairn.dev/libs/names"
	"cairn.dev/libs/validation"
)

// RowCountsCheck is the check the plugin adds to a RestoreJob: the restored
// tables' row counts equal those the backup recorded.
const RowCountsCheck = "row-counts"

type restoreFlags struct {
	into, host, credentials, name, artifact, at string
	port                                        int32
	latest, allowOverwrite, noCheck, dryRun, w  bool
	timeout                                     time.Duration
}

func newRestore(o *Options) *cobra.Command {
	var f restoreFlags
	c := &cobra.Command{
		Use:   "restore BACKUPJOB|PLAN --into DATABASE [--artifact NAME | --latest | --at TIME] [--wait]",
		Short: "Restore a backup into a database (a RestoreJob), follow it and print the restored row counts",
		Long: `restore creates a RestoreJob that restores an artifact of the BackupJob (or a
ProtectionPlan's BackupJob) into the database --into, on the BackupJob's
database server unless --host/--port/--credentials say otherwise. The
artifact is the newest successful one (--latest, the default), a named one
(--artifact, as "kubectl cairn backups" prints it), or the newest taken at or
before --at (RFC 3339, or "2006-01-02 15:04" in the BackupJob's time zone;
read from the store's catalog). The RestoreJob is checked as admission
checks it (cairn.dev/libs/validation) before it is sent, and by admission:
restoring into the very database the BackupJob backs up is refused unless
--allow-overwrite-source. A row-counts check is added (the restored tables'
row counts must equal those the backup recorded) unless --no-check.
With --wait it prints the outcome and the checked row counts; exit code 2 when
the restore failed.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindBackupJob, kindPlan),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.restore(cmd.Context(), args[0], f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.into, "into", "", "Database to restore into (required; created if missing)")
	fl.StringVar(&f.host, "host", "", "Target server host (default: the BackupJob's database host)")
	fl.Int32Var(&f.port, "port", 0, "Target server port (default: the BackupJob's)")
	fl.StringVar(&f.credentials, "credentials", "", "Secret with the target server's username and password (default: the BackupJob's)")
	fl.StringVar(&f.artifact, "artifact", "", "Artifact to restore, as `kubectl cairn backups` prints it")
	fl.BoolVar(&f.latest, "latest", false, "Restore the newest successful artifact (the default)")
	fl.StringVar(&f.at, "at", "", "Restore the newest artifact taken at or before this time")
	fl.StringVar(&f.name, "name", "", "Name of the RestoreJob (default: <backupjob>-<unix time>)")
	fl.BoolVar(&f.allowOverwrite, "allow-overwrite-source", false, "Allow restoring into the very database the BackupJob backs up")
	fl.BoolVar(&f.noCheck, "no-check", false, "Do not add the row-counts check")
	fl.BoolVar(&f.dryRun, "dry-run", false, "Print the RestoreJob as admission accepts it (server-side dry run); create nothing")
	addWaitFlags(c, &f.w, &f.timeout, 2*time.Hour, "the restore")
	c.MarkFlagsMutuallyExclusive("artifact", "latest", "at")
	_ = c.MarkFlagRequired("into")
	return c
}

func (o *Options) restore(ctx context.Context, arg string, f restoreFlags) error {
	bj, _, err := o.backupJobOf(ctx, arg)
	if err != nil {
		return err
	}
	if f.at != "" {
		if f.artifact, err = o.artifactAt(ctx, bj, f.at); err != nil {
			return err
		}
		fmt.Fprintf(o.Streams.ErrOut, "--at %s: artifact %s\n", f.at, f.artifact)
	}
	rj, err := o.restoreJob(bj, f)
	if err != nil {
		return err
	}
	c, err := o.Client()
	if err != nil {
		return err
	}
	if f.dryRun {
		if err := c.Create(ctx, rj, client.DryRunAll); err != nil {
			return err
		}
		rj.ManagedFields = nil
		b, err := yaml.Marshal(rj)
		if err != nil {
			return err
		}
		_, err = o.Streams.Out.Write(b)
		return err
	}
	if err := c.Create(ctx, rj); err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.Out, "restorejob/%s created: backupjob/%s → %s %s/%s\n", rj.Name, bj.Name, rj.Spec.Target.Engine, rj.Spec.Target.Host, rj.Spec.Target.Database)
	if !f.w {
		return nil
	}
	err = o.follow(ctx, rj, f.timeout, func() (bool, string, error) {
		progress := "phase " + string(rj.Status.Phase)
		if a := rj.Status.Artifact; a != nil {
			progress += ": " + a.Path
		}
		return rj.Finished(), progress, nil
	})
	if err != nil {
		return err
	}
	return o.printRestore(rj)
}

// restoreJob builds the RestoreJob and checks it as admission does.
func (o *Options) restoreJob(bj *backupv1.BackupJob, f restoreFlags) (*restorev1.RestoreJob, error) {
	target := bj.Spec.Database // the same server, another database, by default
	target.Database = f.into
	if f.host != "" {
		target.Host, target.Port = f.host, 0
	}
	if f.port != 0 {
		target.Port = f.port
	}
	if f.credentials != "" {
		target.CredentialsSecretRef = cairnv1.LocalObjectReference{Name: f.credentials}
	}
	name := f.name
	if name == "" {
		name = fmt.Sprintf("%s-%d", names.Prefix(bj.Name, 44), o.Now().Unix())
	}
	rj := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: name},
		Spec: restorev1.RestoreJobSpec{
			Source:               restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: bj.Name, Artifact: f.artifact}},
			Target:               target,
			AllowOverwriteSource: f.allowOverwrite,
		},
	}
	if !f.noCheck {
		rj.Spec.Checks = []restorev1.Check{{Name: RowCountsCheck, RowCountsMatchBackup: true}}
	}
	errs := validation.ObjectName(name, field.NewPath("metadata", "name"), "the RestoreJob")
	errs = append(errs, validation.Database(&rj.Spec.Target, field.NewPath("spec", "target"), "RestoreJob")...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("the RestoreJob would be refused: %w", errs.ToAggregate())
	}
	if !f.allowOverwrite && validation.SameDatabase(rj.Spec.Target, validation.Scope{Namespace: rj.Namespace}, bj.Spec.Database, validation.Scope{Namespace: bj.Namespace}) {
		return nil, fmt.Errorf("--into %s on %s is the database backupjob/%s backs up: restoring would overwrite it with the backup; "+
			"choose another database (or --host), or pass --allow-overwrite-source to overwrite it on purpose", f.into, target.Host, bj.Name)
	}
	return rj, nil
}

// printRestore prints a finished RestoreJob: artifact, checks, result.
func (o *Options) printRestore(rj *restorev1.RestoreJob) error {
	w := o.Streams.Out
	st := rj.Status
	if a := st.Artifact; a != nil {
		fmt.Fprintf(w, "  artifact %s (%s, %s)\n", a.Path, view.HumanBytes(a.Size), a.Checksum)
	}
	if st.StartTime != nil && st.CompletionTime != nil {
		fmt.Fprintf(w, "  took %s (%d attempt(s))\n", st.CompletionTime.Sub(st.StartTime.Time).Round(time.Second), st.Attempts)
	}
	for _, ch := range st.Checks {
		res := "passed"
		if !ch.Passed {
			res = "FAILED: " + ch.Message
		}
		fmt.Fprintf(w, "  check %s: %s: %s\n", ch.Name, res, ch.Value)
	}
	if st.Phase != restorev1.PhaseSucceeded {
		fmt.Fprintf(w, "restorejob/%s: Failed: %s\n", rj.Name, stalledMessage(st.Conditions))
		return &exitError{code: 2, msg: "the restore failed"}
	}
	fmt.Fprintf(w, "restorejob/%s: Succeeded into %s/%s\n", rj.Name, rj.Spec.Target.Host, rj.Spec.Target.Database)
	return nil
}

// artifactAt picks, from the store's catalog, the newest artifact taken at
// or before at.
func (o *Options) artifactAt(ctx context.Context, bj *backupv1.BackupJob, at string) (string, error) {
	t, err := parseTime(at, bj.Spec.TimeZone)
	if err != nil {
		return "", err
	}
	cat, err := o.listCatalog(ctx, bj, false, 5*time.Minute)
	if err != nil {
		return "", err
	}
	for _, a := range cat.Artifacts { // newest first
		if a.Time != nil && !a.Time.After(t) {
			return a.Path, nil
		}
	}
	oldest := "none listed"
	if n := len(cat.Artifacts); n > 0 && cat.Artifacts[n-1].Time != nil {
		oldest = cat.Artifacts[n-1].Time.Format(time.RFC3339)
	}
	return "", fmt.Errorf("--at %s: no artifact of backupjob/%s taken at or before it among the %d listed (the oldest listed: %s)", at, bj.Name, len(cat.Artifacts), oldest)
}

// parseTime reads RFC 3339, or a local time in the time zone tz.
func parseTime(s, tz string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "" {
		loc = time.UTC
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--at %q: use RFC 3339 (2026-01-02T15:04:05Z) or \"2026-01-02 15:04\" in the BackupJob's time zone (%s)", s, loc)
}
