package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// kind is one of Cairn's kinds as the plugin names them.
type kind struct {
	name    string   // "backupjob"
	aliases []string // kubectl's short names
	list    func() client.ObjectList
	new     func() client.Object
	// podLabel is the label on its agent pods holding the object's name.
	podLabel string
}

var (
	kindBackupJob = kind{"backupjob", []string{"backupjobs", "bj", "bjob"},
		func() client.ObjectList { return &backupv1.BackupJobList{} }, func() client.Object { return &backupv1.BackupJob{} }, backupv1.BackupJobLabel}
	kindPlan = kind{"protectionplan", []string{"protectionplans", "plan", "plans", "pp"},
		func() client.ObjectList { return &platformv1.ProtectionPlanList{} }, func() client.Object { return &platformv1.ProtectionPlan{} }, ""}
	kindMigrationJob = kind{"migrationjob", []string{"migrationjobs", "mj"},
		func() client.ObjectList { return &migrationv1.MigrationJobList{} }, func() client.Object { return &migrationv1.MigrationJob{} }, migrationv1.MigrationJobLabel}
	kindRestoreJob = kind{"restorejob", []string{"restorejobs", "rj", "rjob"},
		func() client.ObjectList { return &restorev1.RestoreJobList{} }, func() client.Object { return &restorev1.RestoreJob{} }, restorev1.RestoreJobLabel}
	kinds = []kind{kindBackupJob, kindPlan, kindMigrationJob, kindRestoreJob}
)

func (k kind) matches(s string) bool {
	s = strings.ToLower(s)
	if s == k.name {
		return true
	}
	for _, a := range k.aliases {
		if s == a {
			return true
		}
	}
	return false
}

// resolve finds "kind/name" or a bare name among allowed, in the
// namespace: a bare name must name exactly one object of those kinds.
func (o *Options) resolve(ctx context.Context, arg string, allowed ...kind) (kind, client.Object, error) {
	ns, err := o.Namespace()
	if err != nil {
		return kind{}, nil, err
	}
	c, err := o.Client()
	if err != nil {
		return kind{}, nil, err
	}
	name := arg
	if k, n, ok := strings.Cut(arg, "/"); ok {
		name = n
		var only []kind
		for _, a := range allowed {
			if a.matches(k) {
				only = append(only, a)
			}
		}
		if len(only) == 0 {
			return kind{}, nil, fmt.Errorf("%q: use one of %s", k, kindNames(allowed))
		}
		allowed = only
	}
	var found []kind
	var obj client.Object
	for _, k := range allowed {
		o := k.new()
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, o); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return kind{}, nil, err
			}
			continue
		}
		found, obj = append(found, k), o
	}
	switch len(found) {
	case 0:
		return kind{}, nil, fmt.Errorf("no %s named %q in namespace %q (kubectl cairn status lists what exists)", kindNames(allowed), name, ns)
	case 1:
		return found[0], obj, nil
	}
	return kind{}, nil, fmt.Errorf("%q names a %s: say which, e.g. %s/%s", name, kindNames(found), found[0].name, name)
}

func kindNames(ks []kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, k.name)
	}
	return strings.Join(s, " or ")
}

// completeNames completes the names of objects of kinds in the namespace.
func completeNames(o *Options, ks ...kind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := o.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, k := range ks {
			l := k.list()
			if err := c.List(cmd.Context(), l, client.InNamespace(ns)); err != nil {
				continue
			}
			for _, n := range objectNames(l) {
				if strings.HasPrefix(n, toComplete) {
					out = append(out, n)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func objectNames(l client.ObjectList) []string {
	var n []string
	switch l := l.(type) {
	case *backupv1.BackupJobList:
		for _, i := range l.Items {
			n = append(n, i.Name)
		}
	case *platformv1.ProtectionPlanList:
		for _, i := range l.Items {
			n = append(n, i.Name)
		}
	case *migrationv1.MigrationJobList:
		for _, i := range l.Items {
			n = append(n, i.Name)
		}
	case *restorev1.RestoreJobList:
		for _, i := range l.Items {
			n = append(n, i.Name)
		}
	}
	return n
}

// registerNamespaceCompletion completes -n with the namespaces the user may list.
func registerNamespaceCompletion(root *cobra.Command, o *Options) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := o.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var l corev1.NamespaceList
		if err := c.List(cmd.Context(), &l); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range l.Items {
			if strings.HasPrefix(n.Name, toComplete) {
				out = append(out, n.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}
