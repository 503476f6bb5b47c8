package deploy_test

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// TestNoWildcardRBAC: no rule anywhere uses * for verbs, resources or groups.
func TestNoWildcardRBAC(t *testing.T) {
	for name, objs := range allBuilds(t) {
		for _, o := range ofKind(objs, "ClusterRole", "Role") {
			var r rbacv1.ClusterRole
			into(t, o, &r)
			if r.AggregationRule != nil {
				t.Errorf("%s: %s %s aggregates other roles", name, o.GetKind(), o.GetName())
			}
			for _, rule := range r.Rules {
				for _, v := range slices.Concat(rule.Verbs, rule.Resources, rule.APIGroups, rule.ResourceNames, rule.NonResourceURLs) {
					if strings.Contains(v, "*") {
						t.Errorf("%s: %s %s has a wildcard rule %+v", name, o.GetKind(), o.GetName(), rule)
					}
				}
			}
		}
	}
}

// grant is what an operator may do with one group/resource.
type grant struct {
	write bool // any verb; otherwise only get, list, watch
}

// allowed lists, per operator, every group/resource its ClusterRoles may name:
// its own kinds, what it creates, and what it only reads.
var allowed = map[string]map[string]grant{
	"backup": {
		"backup.cairn.dev/backupjobs":               {write: true},
		"backup.cairn.dev/backupjobs/status":        {write: true},
		"backup.cairn.dev/backupjobs/finalizers":    {write: true},
		"batch/cronjobs":                            {write: true},
		"batch/jobs":                                {write: true},
		"/pods":                                     {},
		"/secrets":                                  {}, // references checked before a run (libs/references)
		"/persistentvolumeclaims":                   {},
		"/events":                                   {write: true},
		"events.k8s.io/events":                      {write: true},
		"authentication.k8s.io/tokenreviews":        {write: true},
		"authorization.k8s.io/subjectaccessreviews": {write: true},
	},
	"restore": {
		"restore.cairn.dev/restorejobs":             {write: true},
		"restore.cairn.dev/restorejobs/status":      {write: true},
		"restore.cairn.dev/restorejobs/finalizers":  {write: true},
		"backup.cairn.dev/backupjobs":               {},
		"batch/jobs":                                {write: true},
		"/pods":                                     {},
		"/secrets":                                  {}, // references checked before a run (libs/references)
		"/persistentvolumeclaims":                   {},
		"/events":                                   {write: true},
		"events.k8s.io/events":                      {write: true},
		"coordination.k8s.io/leases":                {write: true},
		"authentication.k8s.io/tokenreviews":        {write: true},
		"authorization.k8s.io/subjectaccessreviews": {write: true},
	},
	// The migration operator patches one Secret, the one a MigrationJob's
	// spec.cutover.switchSecret names, at cutover (its host, port and
	// database keys); everything else it only reads.
	"migration": {
		"migration.cairn.dev/migrationjobs":            {write: true},
		"migration.cairn.dev/migrationjobs/status":     {write: true},
		"migration.cairn.dev/migrationjobs/finalizers": {write: true},
		"batch/jobs":                         {write: true},
		"/pods":                              {},
		"/secrets":                           {write: true},
		"/persistentvolumeclaims":            {},
		"/events":                            {write: true},
		"events.k8s.io/events":               {write: true},
		"coordination.k8s.io/leases":         {write: true},
		"authentication.k8s.io/tokenreviews": {write: true},
		"authorization.k8s.io/subjectaccessreviews": {write: true},
	},
	// The orchestrator writes its children (BackupJobs, RestoreJobs,
	// MigrationJobs) and reads their status; never Jobs, Pods or Secrets.
	"orchestrator": {
		"platform.cairn.dev/protectionplans":            {write: true},
		"platform.cairn.dev/protectionplans/status":     {write: true},
		"platform.cairn.dev/protectionplans/finalizers": {write: true},
		"backup.cairn.dev/backupjobs":                   {write: true},
		"restore.cairn.dev/restorejobs":                 {write: true},
		"migration.cairn.dev/migrationjobs":             {write: true},
		"/events":                                       {write: true},
		"events.k8s.io/events":                          {write: true},
		"coordination.k8s.io/leases":                    {write: true},
		"authentication.k8s.io/tokenreviews":            {write: true},
		"authorization.k8s.io/subjectaccessreviews":     {write: true},
	},
}

// composes lists the operators that create other operators' kinds as their
// children (the orchestrator), and which: the one exception to "an
// operator's own group is written by nobody else". Status, finalizers and
// everything else of those kinds stay the owning operator's.
var composes = map[string][]string{
	"orchestrator": {"backup.cairn.dev/backupjobs", "restore.cairn.dev/restorejobs", "migration.cairn.dev/migrationjobs"},
}

// TestOperatorClusterRolesAreScoped: each operator's ClusterRoles grant only
// its own kinds, what it creates and what it reads (read-only), so no
// operator holds another's write permissions; the generated manager role
// exists with the name the markers give it.
func TestOperatorClusterRolesAreScoped(t *testing.T) {
	for _, op := range operators {
		objs := build(t, "deploy/"+op)
		find(t, objs, "ClusterRole", "cairn-"+op+"-manager")
		roles := ofKind(objs, "ClusterRole")
		for _, o := range roles {
			var r rbacv1.ClusterRole
			into(t, o, &r)
			for _, rule := range r.Rules {
				for _, g := range rule.APIGroups {
					for _, res := range rule.Resources {
						key := g + "/" + res
						a, ok := allowed[op][key]
						switch {
						case !ok:
							t.Errorf("%s: ClusterRole %s grants %v on %s, which is neither its own kind nor one it creates or reads", op, r.Name, rule.Verbs, key)
						case !a.write && slices.ContainsFunc(rule.Verbs, func(v string) bool { return slices.Contains(writeVerbs, v) }):
							t.Errorf("%s: ClusterRole %s may %v %s, which it should only read", op, r.Name, rule.Verbs, key)
						}
					}
				}
			}
		}
		// The operator's own group is granted nowhere else.
		for _, other := range operators {
			if other == op {
				continue
			}
			for key, a := range allowed[other] {
				if strings.HasPrefix(key, op+".cairn.dev/") && a.write && !slices.Contains(composes[other], key) {
					t.Errorf("%s may write %s, a kind of %s", other, key, op)
				}
			}
		}
		// Leader election is confined to the operator's namespace.
		for _, o := range ofKind(objs, "Role") {
			if o.GetNamespace() != "cairn-system" {
				t.Errorf("%s: Role %s is in namespace %q", op, o.GetName(), o.GetNamespace())
			}
		}
	}
}
