package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/kubectl-cairn/internal/view"
	"cairn.dev/libs/names"
)

func newBackup(o *Options) *cobra.Command {
	var w bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "backup BACKUPJOB [--wait]",
		Short: "Run a backup now (one run per call), and follow it to its result",
		Long: `backup asks the backup operator for one run now (the BackupJob's run-now
annotation, with a new request id): exactly one Job per call, never overlapping
a running backup of the same BackupJob (it starts when that one finished).
With --wait it follows the run in the BackupJob's status and prints its
artifact, or why it failed (exit code 2).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindBackupJob),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.backup(cmd.Context(), args[0], w, timeout)
		},
	}
	addWaitFlags(c, &w, &timeout, time.Hour, "the run")
	return c
}

func (o *Options) backup(ctx context.Context, name string, w bool, timeout time.Duration) error {
	bj := &backupv1.BackupJob{}
	_, err := o.get(ctx, name, bj)
	if err != nil {
		return err
	}
	id, err := o.request(ctx, bj, backupv1.RunNowAnnotation)
	if err != nil {
		return err
	}
	job, _ := names.Request(bj.Namespace, name, "now", id)
	fmt.Fprintf(o.Streams.Out, "backupjob/%s: backup requested (request %s, Job %s)\n", name, id, job)
	if bj.Spec.Suspend {
		fmt.Fprintf(o.Streams.ErrOut, "warning: backupjob/%s is suspended: the run starts when spec.suspend is false\n", name)
		return nil
	}
	if !w {
		return nil
	}
	err = o.follow(ctx, bj, timeout, func() (bool, string, error) {
		st := bj.Status
		switch {
		case st.LastRunName == job:
			return true, "", nil
		case st.LastRunNowRequest == id:
			return false, "running (Job " + job + ")", nil
		}
		return false, "waiting for the operator (phase " + string(st.Phase) + ")", nil
	})
	if err != nil {
		return err
	}
	st := bj.Status
	if st.LastResult != backupv1.RunSucceeded {
		fmt.Fprintf(o.Streams.Out, "backupjob/%s: backup failed: %s\n", name, st.LastRunMessage)
		return &exitError{code: 2, msg: "the backup failed"}
	}
	if a := st.LastArtifact; a != nil {
		fmt.Fprintf(o.Streams.Out, "backupjob/%s: backup succeeded: %s (%s, %s)\n", name, a.Path, view.HumanBytes(a.Size), a.Checksum)
	} else {
		fmt.Fprintf(o.Streams.Out, "backupjob/%s: backup succeeded: %s\n", name, st.LastRunMessage)
	}
	return nil
}
