package deploy_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// rules is what one role grants: "group/resource" → its verbs, sorted.
type rules map[string][]string

var (
	readOnly    = []string{"get", "list", "watch"}
	createPatch = []string{"create", "patch"}
)

// shared are the roles every operator gets from deploy/components/operator:
// metrics authentication (cluster-wide, bound by a ClusterRoleBinding) and
// leader election (a Role in cairn-system).
func shared(op string) map[string]rules {
	return map[string]rules{
		"ClusterRole cairn-" + op + "-metrics-auth": {
			"authentication.k8s.io/tokenreviews":        {"create"},
			"authorization.k8s.io/subjectaccessreviews": {"create"},
		},
		"Role cairn-system/cairn-" + op + "-leader-election": {
			"coordination.k8s.io/leases": {"create", "delete", "get", "list", "patch", "update", "watch"},
			"/events":                    createPatch,
			"events.k8s.io/events":       createPatch,
		},
		// The approval key (libs/access): this one Secret, shipped empty and
		// filled by the operator; no create, no other Secret.
		"Role cairn-system/cairn-" + op + "-approval-key": {
			"/secrets":                       {"get", "patch"},
			"?resourceNames/nonResourceURLs": {"cairn-" + op + "-approval-key"},
		},
	}
}

// exactRBAC is, per operator, every role its base ships (kind, namespace for
// a Role, name) and exactly what each grants. Adding a verb, a resource, a
// role or changing a Role into a ClusterRole fails
// TestOperatorRBACIsExact: change this table only with the reason next to
// the entry, and keep docs/security.md true.
var exactRBAC = map[string]map[string]rules{
	"backup": {
		"ClusterRole cairn-backup-manager": {
			"authorization.k8s.io/subjectaccessreviews": {"create"},                        // the webhooks review the requester's rights (libs/access)
			"backup.cairn.dev/backupjobs":               {"get", "list", "patch", "watch"}, // patch: the finalizer
			"backup.cairn.dev/backupjobs/status":        {"patch"},
			"backup.cairn.dev/backupjobs/finalizers":    {"update"},
			"batch/cronjobs":                            {"create", "delete", "get", "list", "patch", "update", "watch"},
			"batch/jobs":                                {"create", "delete", "get", "list", "watch"}, // run-now and delete Jobs
			// The point-in-time archiver of a BackupJob (docs/pitr.md):
			// one Deployment it renders (its agent image, restricted pod,
			// no token), drift reverted. Pods in any namespace it can
			// already make with Jobs (docs/security.md).
			"apps/deployments": {"create", "delete", "get", "list", "patch", "update", "watch"},
			"/pods":            readOnly, // the agent's report
			// Secrets: watched as metadata (libs/references), the keys of a
			// referenced one read live. RBAC has no metadata-only verb, so
			// this is every Secret's data cluster-wide (docs/security.md;
			// platform/components/namespaced narrows it). patch (issue
			// 30): the finalizer backup.cairn.dev/artifact-delete on a
			// Delete-policy BackupJob's S3 credentials Secret, and the keys
			// of cairn-system/cairn-backup-delete-credentials — nothing
			// else, whatever RBAC says: the ValidatingAdmissionPolicy
			// cairn-backup-secret-writes (TestBackupSecretWritesPolicy).
			"/secrets": {"get", "list", "patch", "watch"},
			// Claims and volumes (issue 30, a PVC store of a namespace
			// being deleted): patch the finalizer
			// backup.cairn.dev/artifact-delete on a Delete-policy
			// BackupJob's claim; create and delete claims
			// cairn-system/cairn-backup-delete-* naming a volume; get a
			// volume and point its claimRef to such a claim and back to
			// the claim recorded on it — nothing else, whatever RBAC says:
			// the ValidatingAdmissionPolicies cairn-backup-claim-writes and
			// cairn-backup-volume-writes (TestBackupVolumeWritesPolicy).
			"/persistentvolumeclaims": {"create", "delete", "get", "list", "patch", "watch"},
			"/persistentvolumes":      {"get", "patch"},
			"/configmaps":             readOnly, // metadata only: spec.encryption.recipients.configMapKeyRef exists (issue 25)
			"events.k8s.io/events":    createPatch,
		},
	},
	"restore": {
		"ClusterRole cairn-restore-manager": {
			"authorization.k8s.io/subjectaccessreviews": {"create"}, // the webhooks review the requester's rights (libs/access)
			"restore.cairn.dev/restorejobs":             {"get", "list", "patch", "watch"},
			"restore.cairn.dev/restorejobs/status":      {"patch"},
			"restore.cairn.dev/restorejobs/finalizers":  {"update"},
			"backup.cairn.dev/backupjobs":               readOnly, // the artifact's store
			"batch/jobs":                                {"create", "delete", "get", "list", "watch"},
			// patch (issue 30): only removing the finalizer
			// restore.cairn.dev/scratch-report a verification restore's
			// pods carry from their Job's template, once their report was
			// read — nothing else, whatever RBAC says: the
			// ValidatingAdmissionPolicy cairn-restore-pod-writes
			// (TestRestorePodWritesPolicy).
			"/pods":                   {"get", "list", "patch", "watch"},
			"/namespaces":             {"get"},  // is the namespace being deleted: Events go on the Namespace too
			"/secrets":                readOnly, // as backup
			"/persistentvolumeclaims": readOnly,
			"/events":                 createPatch,
			"events.k8s.io/events":    createPatch,
		},
	},
	// patch on Secrets, which the ValidatingAdmissionPolicy
	// cairn-migration-secret-switch holds to two writes: its finalizer
	// migration.cairn.dev/remote-cleanup on a kubeconfig Secret (issue
	// 30), and switchSecret's host/port/database of a labelled Secret in a
	// namespace that granted the verb "switch" by binding
	// cairn-migration-secret-switcher (bound nowhere by the platform: a
	// tenant binds it in a namespace; TestSecretSwitchPolicy).
	"migration": {
		"ClusterRole cairn-migration-manager": {
			"authorization.k8s.io/subjectaccessreviews":    {"create"}, // the webhooks review the requester's rights (libs/access)
			"migration.cairn.dev/migrationjobs":            {"get", "list", "patch", "watch"},
			"migration.cairn.dev/migrationjobs/status":     {"patch"},
			"migration.cairn.dev/migrationjobs/finalizers": {"update"},
			"batch/jobs":              {"create", "delete", "get", "list", "watch"},
			"/pods":                   readOnly,
			"/secrets":                {"get", "list", "patch", "watch"}, // references, kubeconfig Secrets, switchSecret's current keys; patch: above
			"/namespaces":             {"get"},                           // is the namespace being deleted: Events go on the Namespace too
			"/persistentvolumeclaims": readOnly,
			"/configmaps":             readOnly, // metadata only: spec.transfer.encryption.recipients.configMapKeyRef exists (issue 25)
			"/events":                 createPatch,
			"events.k8s.io/events":    createPatch,
		},
		"ClusterRole cairn-migration-secret-switcher": {
			"/secrets": {"switch"},
		},
	},
	// The orchestrator writes its children (BackupJobs, RestoreJobs,
	// MigrationJobs) and reads their status; never Jobs, Pods or Secrets.
	"orchestrator": {
		"ClusterRole cairn-orchestrator-manager": {
			"authorization.k8s.io/subjectaccessreviews":     {"create"}, // the webhooks review the requester's rights (libs/access)
			"platform.cairn.dev/protectionplans":            {"get", "list", "patch", "watch"},
			"platform.cairn.dev/protectionplans/status":     {"patch"},
			"platform.cairn.dev/protectionplans/finalizers": {"update"},
			"backup.cairn.dev/backupjobs":                   {"create", "delete", "get", "list", "update", "watch"},
			"restore.cairn.dev/restorejobs":                 {"create", "delete", "get", "list", "update", "watch"},
			"migration.cairn.dev/migrationjobs":             {"create", "delete", "get", "list", "update", "watch"},
			"/events":                                       createPatch,
			"events.k8s.io/events":                          createPatch,
		},
	},
}

// exactBindings is, per operator, every binding its base ships: "kind
// [namespace/]name" → the role it binds. All bind the operator's own
// ServiceAccount (checked). cairn-migration-secret-switcher is bound
// nowhere.
func exactBindings(op string) map[string]string {
	return map[string]string{
		"ClusterRoleBinding cairn-" + op + "-manager":               "ClusterRole cairn-" + op + "-manager",
		"ClusterRoleBinding cairn-" + op + "-metrics-auth":          "ClusterRole cairn-" + op + "-metrics-auth",
		"RoleBinding cairn-system/cairn-" + op + "-leader-election": "Role cairn-" + op + "-leader-election",
		"RoleBinding cairn-system/cairn-" + op + "-approval-key":    "Role cairn-" + op + "-approval-key",
	}
}

// roleKey names a role as exactRBAC does.
func roleKey(o *unstructured.Unstructured) string {
	if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

// grants flattens a role's rules into group/resource → sorted verbs.
func grants(r []rbacv1.PolicyRule) rules {
	out := rules{}
	for _, rule := range r {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				key := g + "/" + res
				out[key] = append(out[key], rule.Verbs...)
			}
		}
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			out["?resourceNames/nonResourceURLs"] = append(rule.ResourceNames, rule.NonResourceURLs...)
		}
	}
	for k, v := range out {
		slices.Sort(v)
		out[k] = slices.Compact(v)
	}
	return out
}

// TestOperatorRBACIsExact: each operator's base ships exactly the roles of
// exactRBAC with exactly their verbs, and exactly the bindings of
// exactBindings, each to the operator's own ServiceAccount. Any verb,
// resource, role or binding more (or a Role made a ClusterRole) fails.
func TestOperatorRBACIsExact(t *testing.T) {
	for _, op := range operators {
		objs := build(t, "deploy/"+op)
		want := shared(op)
		maps.Copy(want, exactRBAC[op])
		got := map[string]rules{}
		for _, o := range ofKind(objs, "ClusterRole", "Role") {
			var r rbacv1.ClusterRole
			into(t, o, &r)
			got[roleKey(o)] = grants(r.Rules)
		}
		for key, w := range want {
			g, ok := got[key]
			if !ok {
				t.Errorf("%s: no %s", op, key)
				continue
			}
			for res, verbs := range g {
				if wv, ok := w[res]; !ok {
					t.Errorf("%s: %s grants %v on %s, which it must not have at all", op, key, verbs, res)
				} else if !slices.Equal(verbs, wv) {
					t.Errorf("%s: %s grants %v on %s, want exactly %v", op, key, verbs, res, wv)
				}
			}
			for res, wv := range w {
				if _, ok := g[res]; !ok {
					t.Errorf("%s: %s does not grant %v on %s (update exactRBAC if it is no longer needed)", op, key, wv, res)
				}
			}
		}
		for key := range got {
			if _, ok := want[key]; !ok {
				t.Errorf("%s: the base ships %s, which exactRBAC does not know", op, key)
			}
		}

		wantB := exactBindings(op)
		sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "cairn-" + op + "-controller-manager", Namespace: "cairn-system"}
		gotB := map[string]bool{}
		for _, o := range ofKind(objs, "ClusterRoleBinding", "RoleBinding") {
			var b rbacv1.RoleBinding
			into(t, o, &b)
			key := roleKey(o)
			gotB[key] = true
			if w, ok := wantB[key]; !ok {
				t.Errorf("%s: the base ships %s (to %s %s), which exactBindings does not know", op, key, b.RoleRef.Kind, b.RoleRef.Name)
			} else if b.RoleRef.Kind+" "+b.RoleRef.Name != w {
				t.Errorf("%s: %s binds %s %s, want %s", op, key, b.RoleRef.Kind, b.RoleRef.Name, w)
			}
			if len(b.Subjects) != 1 || b.Subjects[0] != sa {
				t.Errorf("%s: %s binds %+v, want only %+v", op, key, b.Subjects, sa)
			}
		}
		for key := range wantB {
			if !gotB[key] {
				t.Errorf("%s: no %s", op, key)
			}
		}
	}
}

// composes lists the operators that create other operators' kinds as their
// children (the orchestrator), and which: the one exception to "an
// operator's own group is written by nobody else". Status, finalizers and
// everything else of those kinds stay the owning operator's.
var composes = map[string][]string{
	"orchestrator": {"backup.cairn.dev/backupjobs", "restore.cairn.dev/restorejobs", "migration.cairn.dev/migrationjobs"},
}

// TestNoOperatorWritesAnothersKinds: an operator's own group is written by
// no other operator, except the orchestrator's children (composes).
func TestNoOperatorWritesAnothersKinds(t *testing.T) {
	for _, op := range operators {
		for _, other := range operators {
			if other == op {
				continue
			}
			for _, rs := range exactRBAC[other] {
				for key, verbs := range rs {
					write := slices.ContainsFunc(verbs, func(v string) bool { return slices.Contains(writeVerbs, v) })
					if strings.HasPrefix(key, op+".cairn.dev/") && write && !slices.Contains(composes[other], key) {
						t.Errorf("%s may write %s, a kind of %s", other, key, op)
					}
				}
			}
		}
	}
}
