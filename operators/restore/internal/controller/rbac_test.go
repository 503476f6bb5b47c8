package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testenv"
)

// The operator runs with nothing but its generated ClusterRole and the base's
// leader-election Role (bound in the Lease's namespace), and a restore still
// succeeds end to end: leader election, webhook read of the BackupJob, Job
// creation, status, Events.
func TestRunsWithOnlyTheGeneratedRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "restore", "rbac", "generated", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	g.Expect(role.Name).To(Equal("cairn-restore-manager"))
	for _, rule := range role.Rules {
		g.Expect(rule.Verbs).NotTo(ContainElement("*"))
		g.Expect(rule.Resources).NotTo(ContainElement("*"))
		g.Expect(rule.APIGroups).NotTo(ContainElement("*"))
	}
	if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const user = "system:serviceaccount:cairn-system:restore-operator"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cairn-restore-manager-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	g.Expect(env.Client.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	// The leader-election Role of deploy/restore, in the namespace the test
	// operator keeps its Lease in.
	raw, err = os.ReadFile(filepath.Join(root, "deploy", "restore", "rbac", "leader_election_role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	le := &rbacv1.Role{}
	g.Expect(yaml.Unmarshal([]byte(strings.Split(string(raw), "\n---")[0]), le)).To(Succeed())
	g.Expect(le.Kind).To(Equal("Role"))
	le.Namespace = "default"
	if err := env.Client.Create(ctx, le); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	leBinding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cairn-restore-leader-election-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: le.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	g.Expect(env.Client.Create(ctx, leBinding)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), leBinding) })
	cfg, err := env.AddUser(user)
	g.Expect(err).NotTo(HaveOccurred())

	startOperator(t, operatorOptions{config: cfg, leaderElection: true})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	// The webhook's overwrite guard reads the BackupJob with the operator's rights.
	bad := restoreJob(ns, "overwrite", fromBackupJob("orders-db", ""))
	bad.Spec.Target = sourceDB()
	err = env.Client.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("restoring would overwrite it"))

	rj := restoreJob(ns, "rbac", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	completeJob(t, job, last)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	g.Eventually(eventReasons(ns, "rbac")).WithTimeout(timeout).Should(ContainElement("Normal/" + cairnv1.SucceededReason))

	// Deletion (the finalizer's Job cleanup) works with the role too.
	g.Expect(env.Client.Delete(ctx, rj)).To(Succeed())
	g.Eventually(gone(job)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(gone(rj)).WithTimeout(timeout).Should(BeTrue())
}
