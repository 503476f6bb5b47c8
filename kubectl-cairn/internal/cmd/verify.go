package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

func newVerify(o *Options) *cobra.Command {
	var w bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "verify PLAN [--wait]",
		Short: "Verify a ProtectionPlan's newest backup now: restore it into the scratch database and run the checks",
		Long: `verify asks the orchestrator for one verification now (the plan's verify-now
annotation, with a new request id): the newest successful backup is restored
into the plan's scratch database and the plan's checks run there. It starts
when no verification is running. With --wait it prints the result, the
checks and the measured restore time (exit code 2 when it failed).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(o, kindPlan),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.verify(cmd.Context(), args[0], w, timeout)
		},
	}
	addWaitFlags(c, &w, &timeout, time.Hour, "the verification")
	return c
}

func (o *Options) verify(ctx context.Context, name string, w bool, timeout time.Duration) error {
	p := &platformv1.ProtectionPlan{}
	if _, err := o.get(ctx, name, p); err != nil {
		return err
	}
	id, err := o.request(ctx, p, platformv1.VerifyNowAnnotation)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Streams.Out, "protectionplan/%s: verification requested (request %s)\n", name, id)
	if p.Status.LastBackup == nil || p.Status.LastBackup.Artifact == nil {
		fmt.Fprintf(o.Streams.ErrOut, "note: protectionplan/%s has no successful backup yet: the verification starts after the first one\n", name)
	}
	if !w {
		return nil
	}
	err = o.follow(ctx, p, timeout, func() (bool, string, error) {
		lv := p.Status.LastVerification
		if p.Status.LastVerifyNowRequest != id || lv == nil {
			if c := meta.FindStatusCondition(p.Status.Conditions, cairnv1.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
				return false, "", fmt.Errorf("protectionplan/%s is stalled (%s): %s", name, c.Reason, c.Message)
			}
			return false, "waiting for the running verification to finish", nil
		}
		return lv.Result == platformv1.VerificationSucceeded || lv.Result == platformv1.VerificationFailed,
			fmt.Sprintf("%s: %s (restorejob/%s)", lv.Result, lv.Artifact.Path, lv.RestoreJob), nil
	})
	if err != nil {
		return err
	}
	lv := p.Status.LastVerification
	for _, ch := range lv.Checks {
		ok := "passed"
		if !ch.Passed {
			ok = "FAILED: " + ch.Message
		}
		fmt.Fprintf(o.Streams.Out, "  check %s: %s (%s)\n", ch.Name, ok, ch.Value)
	}
	if lv.RestoreDuration != nil {
		fmt.Fprintf(o.Streams.Out, "  restore took %s\n", lv.RestoreDuration.Duration)
	}
	fmt.Fprintf(o.Streams.Out, "protectionplan/%s: verification %s: %s\n", name, lv.Result, lv.Message)
	if lv.Result != platformv1.VerificationSucceeded {
		return &exitError{code: 2, msg: "the verification failed"}
	}
	return nil
}

// stalledMessage is the Stalled condition's reason and message, if any.
func stalledMessage(cs []metav1.Condition) string {
	if c := meta.FindStatusCondition(cs, cairnv1.StalledCondition); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "no reason reported"
}
