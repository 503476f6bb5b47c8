package cmd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// addWaitFlags adds --wait and --timeout.
func addWaitFlags(c *cobra.Command, w *bool, timeout *time.Duration, def time.Duration, what string) {
	c.Flags().BoolVar(w, "wait", false, "Follow "+what+" to its result")
	c.Flags().DurationVar(timeout, "timeout", def, "How long --wait waits")
}

// follow reads obj again every Poll until done says it is done, the timeout
// passes or the user interrupts; progress is printed when it changes.
func (o *Options) follow(ctx context.Context, obj client.Object, timeout time.Duration, done func() (bool, string, error)) error {
	c, err := o.Client()
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	last := ""
	err = wait.PollUntilContextTimeout(ctx, o.Poll, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		ok, progress, err := done()
		if progress != "" && progress != last {
			fmt.Fprintf(o.Streams.ErrOut, "  %s\n", progress)
			last = progress
		}
		return ok, err
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("still not finished after %s (last: %s); it goes on: look again with kubectl cairn status", timeout, last)
	}
	return err
}

// get reads the object name of obj's kind from the namespace, and returns
// the client.
func (o *Options) get(ctx context.Context, name string, obj client.Object) (client.Client, error) {
	ns, err := o.Namespace()
	if err != nil {
		return nil, err
	}
	c, err := o.Client()
	if err != nil {
		return nil, err
	}
	return c, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// request sets the request annotation key of obj to a new id (a run-now,
// list or verify-now request) and returns the id.
func (o *Options) request(ctx context.Context, obj client.Object, key string) (string, error) {
	id := o.requestID()
	return id, o.annotate(ctx, obj, key, id)
}

// requestID is a new value for a run-now, list or verify-now annotation.
func (o *Options) requestID() string {
	return strconv.FormatInt(o.Now().UnixNano(), 10)
}

// annotate sets one annotation with a merge patch (patch on the object:
// what cairn-edit grants).
func (o *Options) annotate(ctx context.Context, obj client.Object, key, value string) error {
	c, err := o.Client()
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}
