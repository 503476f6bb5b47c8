package testenv

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// RoleOptions say which RBAC an operator under test gets (AsGeneratedRole).
type RoleOptions struct {
	// Operator is the operator's name, e.g. "backup": it names the user and
	// the default files below.
	Operator string
	// ClusterRoleFile holds the operator's ClusterRole; default
	// deploy/<operator>/rbac/generated/role.yaml (generated from markers).
	ClusterRoleFile string
	// LeaderElectionRoleFile holds the Role for its Lease (its first Role
	// document is used); default deploy/components/operator/leader_election_role.yaml
	// (the Role every operator base gets from the shared component).
	LeaderElectionRoleFile string
	// NoLeaderElection skips the leader-election Role.
	NoLeaderElection bool
	// Namespaces, when set, grant the ClusterRole in these namespaces only
	// (RoleBindings, as platform/components/namespaced does) instead of
	// cluster-wide, to a user of its own: the ServiceAccount's name with
	// the suffix "-namespaced" (so a cluster-wide binding another test made
	// for the operator does not apply).
	Namespaces []string
}

// AsGeneratedRole makes a user bound to nothing but the operator's
// ClusterRole and (in LeaderElectionNamespace) its leader-election Role, as
// installed, and returns a config that connects as that user: an operator
// started with it (OperatorOptions.Config) proves its generated RBAC is
// enough — and a ClusterRole with a wildcard is refused. The user is named
// like the operator's ServiceAccount and is in the ServiceAccount groups.
// Calling it again (another test) reuses the roles.
func (e *Env) AsGeneratedRole(ctx context.Context, ro RoleOptions) (*rest.Config, error) {
	if ro.Operator == "" {
		return nil, fmt.Errorf("testenv: AsGeneratedRole needs the operator's name")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if ro.ClusterRoleFile == "" {
		ro.ClusterRoleFile = filepath.Join(root, "deploy", ro.Operator, "rbac", "generated", "role.yaml")
	}
	if ro.LeaderElectionRoleFile == "" {
		ro.LeaderElectionRoleFile = filepath.Join(root, "deploy", "components", "operator", "leader_election_role.yaml")
	}
	const saNamespace = "cairn-system"
	sa := "cairn-" + ro.Operator + "-controller-manager"
	suffix := ""
	if len(ro.Namespaces) > 0 {
		suffix = "-namespaced"
	}
	user := "system:serviceaccount:" + saNamespace + ":" + sa + suffix
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}

	role := &rbacv1.ClusterRole{}
	if err := readDocument(ro.ClusterRoleFile, "ClusterRole", role); err != nil {
		return nil, err
	}
	if err := noWildcards(ro.ClusterRoleFile, role.Rules); err != nil {
		return nil, err
	}
	if err := apply(ctx, e.Client, role, func(live *rbacv1.ClusterRole) { live.Rules = role.Rules }); err != nil {
		return nil, err
	}
	if len(ro.Namespaces) > 0 {
		// SubjectAccessReviews are cluster-scoped: a RoleBinding cannot
		// grant them. As installed, the namespaced mode keeps the
		// cluster-wide cairn-<operator>-metrics-auth binding, which grants
		// them (the webhooks review requesters with it, libs/access).
		reviews := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cairn-" + ro.Operator + "-reviews-test"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}}}
		if err := apply(ctx, e.Client, reviews, func(live *rbacv1.ClusterRole) { live.Rules = reviews.Rules }); err != nil {
			return nil, err
		}
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: reviews.Name + suffix},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reviews.Name},
			Subjects:   subject,
		}
		if err := apply(ctx, e.Client, crb, func(*rbacv1.ClusterRoleBinding) {}); err != nil {
			return nil, err
		}
	}
	for _, ns := range ro.Namespaces {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name + "-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subject,
		}
		if err := apply(ctx, e.Client, rb, func(*rbacv1.RoleBinding) {}); err != nil {
			return nil, err
		}
	}
	if len(ro.Namespaces) == 0 {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subject,
		}
		if err := apply(ctx, e.Client, binding, func(*rbacv1.ClusterRoleBinding) {}); err != nil {
			return nil, err
		}
	}
	if !ro.NoLeaderElection {
		le := &rbacv1.Role{}
		if err := readDocument(ro.LeaderElectionRoleFile, "Role", le); err != nil {
			return nil, fmt.Errorf("%w (set RoleOptions.LeaderElectionRoleFile, or NoLeaderElection)", err)
		}
		le.Namespace = LeaderElectionNamespace
		if err := apply(ctx, e.Client, le, func(live *rbacv1.Role) { live.Rules = le.Rules }); err != nil {
			return nil, err
		}
		leBinding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: LeaderElectionNamespace, Name: le.Name + "-test" + suffix},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: le.Name},
			Subjects:   subject,
		}
		if err := apply(ctx, e.Client, leBinding, func(*rbacv1.RoleBinding) {}); err != nil {
			return nil, err
		}
	}
	if err := e.approvalKey(ctx, root, ro.Operator, subject); err != nil {
		return nil, err
	}
	if err := apply(ctx, e.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: saNamespace}}, func(*corev1.Namespace) {}); err != nil {
		return nil, err
	}
	return e.AddUser(user, "system:serviceaccounts", "system:serviceaccounts:"+saNamespace)
}

// apply creates obj, or updates the existing one with update.
func apply[T client.Object](ctx context.Context, c client.Client, obj T, update func(T)) error {
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live := obj.DeepCopyObject().(T)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return err
	}
	update(live)
	return c.Update(ctx, live)
}

// readDocument decodes the first YAML document of kind in file into out.
func readDocument(file, kind string, out any) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("testenv: reading the %s: %w", kind, err)
	}
	return decodeDocument(raw, file, kind, out)
}

// decodeDocument decodes the first YAML document of kind in raw (read from
// file) into out.
func decodeDocument(raw []byte, file, kind string, out any) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err != nil {
			return fmt.Errorf("testenv: no %s in %s", kind, file)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("testenv: %s: %w", file, err)
		}
		if tm.Kind == kind {
			return yaml.UnmarshalStrict(doc, out)
		}
	}
}

func noWildcards(file string, rules []rbacv1.PolicyRule) error {
	for _, r := range rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
			return fmt.Errorf("testenv: %s grants a wildcard (%v): an operator gets only what it names", file, r)
		}
	}
	return nil
}

// Tenant makes user (authenticated by a client certificate, in no group)
// and binds it, in namespace ns, to a new Role with rules; it returns a
// config that connects as that user. Call it again for the same user to
// grant more (another Role). For tests of what a namespace user may make
// an operator do.
func (e *Env) Tenant(ctx context.Context, ns, user string, rules ...rbacv1.PolicyRule) (*rest.Config, error) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "tenant-" + user + "-"}, Rules: rules}
	if err := e.Client.Create(ctx, role); err != nil {
		return nil, err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := e.Client.Create(ctx, binding); err != nil {
		return nil, err
	}
	return e.AddUser(user)
}

// GrantInNamespace binds the ClusterRole of file (its first ClusterRole
// document, created or updated) to the operator's user, as AsGeneratedRole
// names it, in namespace ns only: a RoleBinding, as a tenant grants an
// operator something in their namespace (e.g. the migration operator's
// cairn-migration-secret-switcher, deploy/migration/rbac).
func (e *Env) GrantInNamespace(ctx context.Context, operator, file, ns string) error {
	role := &rbacv1.ClusterRole{}
	if err := readDocument(file, "ClusterRole", role); err != nil {
		return err
	}
	if err := noWildcards(file, role.Rules); err != nil {
		return err
	}
	if err := apply(ctx, e.Client, role, func(live *rbacv1.ClusterRole) { live.Rules = role.Rules }); err != nil {
		return err
	}
	user := "system:serviceaccount:cairn-system:cairn-" + operator + "-controller-manager"
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	return apply(ctx, e.Client, rb, func(*rbacv1.RoleBinding) {})
}

// approvalKey installs, in LeaderElectionNamespace (where an operator under
// test keeps its approval key, libs/access), what the platform ships for
// it (deploy/components/operator/approval_key.yaml): the empty Secret
// cairn-<operator>-approval-key and the Role that lets the operator get and
// patch that one Secret, bound to subject.
func (e *Env) approvalKey(ctx context.Context, root, operator string, subject []rbacv1.Subject) error {
	file := filepath.Join(root, "deploy", "components", "operator", "approval_key.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	role := &rbacv1.Role{}
	if err := decodeDocument(bytes.ReplaceAll(b, []byte("OPERATOR"), []byte(operator)), file, "Role", role); err != nil {
		return err
	}
	role.Namespace = LeaderElectionNamespace
	if err := apply(ctx, e.Client, role, func(live *rbacv1.Role) { live.Rules = role.Rules }); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: LeaderElectionNamespace, Name: role.Name + "-test-" + strings.ReplaceAll(subject[0].Name, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   subject,
	}
	if err := apply(ctx, e.Client, rb, func(*rbacv1.RoleBinding) {}); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: LeaderElectionNamespace, Name: "cairn-" + operator + "-approval-key"}, Type: corev1.SecretTypeOpaque}
	if err := e.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
