// Package cmd holds the plugin's commands. Each command reads and writes
// Cairn's objects through the API server as the user (their kubeconfig and
// rights); what needs a store or a database is done by the operators, whose
// results the commands read from status.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// Options are what every command shares: kubectl's connection flags, the
// streams, and the clock.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams
	// Now is the clock ("5m ago", time-outs); tests fix it.
	Now func() time.Time
	// Poll is how often --wait reads the object again.
	Poll time.Duration

	client client.Client
	kube   kubernetes.Interface
}

// Scheme knows every kind the plugin reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme,
		backupv1.AddToScheme, restorev1.AddToScheme, migrationv1.AddToScheme, platformv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Client connects with kubectl's flags (--kubeconfig, --context, --as, ...).
func (o *Options) Client() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	o.client = c
	return c, nil
}

// Kube is a client-go clientset (pod logs).
func (o *Options) Kube() (kubernetes.Interface, error) {
	if o.kube != nil {
		return o.kube, nil
	}
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	o.kube = k
	return k, nil
}

// Namespace is -n, else the kubeconfig context's namespace, else "default".
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// NewRoot builds `kubectl cairn` and its commands.
func NewRoot(streams genericiooptions.IOStreams, version string) *cobra.Command {
	o := &Options{
		Flags:   genericclioptions.NewConfigFlags(true),
		Streams: streams,
		Now:     time.Now,
		Poll:    time.Second,
	}
	root := &cobra.Command{
		Use:   "kubectl-cairn",
		Short: "Cairn for the on-call engineer: status, backups, backup now, restore, verify, approve, logs",
		Long: `kubectl cairn shows what Cairn protects and does what an on-call engineer needs
in one command each. It uses your kubeconfig and your rights only: reading a
store's catalog, running a backup or a restore is done by Cairn's operators.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl cairn"},
	}
	o.Flags.AddFlags(root.PersistentFlags())
	registerNamespaceCompletion(root, o)
	root.AddCommand(
		newStatus(o), newBackups(o), newBackup(o), newRestore(o),
		newVerify(o), newApprove(o), newLogs(o),
	)
	return root
}

// Execute runs root until it returns or the user interrupts it, prints an
// error as kubectl does, and returns the exit code.
func Execute(root *cobra.Command, streams genericiooptions.IOStreams) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(streams.ErrOut, "error:", Explain(err))
		var ex *exitError
		if errors.As(err, &ex) {
			return ex.code
		}
		return 1
	}
	return 0
}

// exitError is a result the command already printed, with its exit code
// (a restore that failed: 2).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Explain turns API errors into what to do about them.
func Explain(err error) string {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		return err.Error() + "\n(you lack this right: ask a namespace admin for cairn-edit, or view/edit for logs; kubectl cairn uses your rights only)"
	case apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil:
		d := status.Status().Details
		return fmt.Sprintf("%s %q not found (kubectl cairn status lists what exists)", d.Kind, d.Name)
	}
	return err.Error()
}
