package controller_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"cairn.dev/libs/testing/testenv"
)

// The orchestrator writes child objects and reads their status only: its
// generated ClusterRole has no Jobs, no Pods, no Secrets and no wildcard.
// (Every other test in this package runs the orchestrator with nothing but
// this role: see startOperator.)
func TestGeneratedRoleHasNoJobsPodsOrSecrets(t *testing.T) {
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "orchestrator", "rbac", "generated", "role.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	g.Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	g.Expect(role.Name).To(Equal("cairn-orchestrator-manager"))
	granted := map[string]bool{}
	for _, rule := range role.Rules {
		g.Expect(rule.Verbs).NotTo(ContainElement("*"))
		g.Expect(rule.Resources).NotTo(ContainElement("*"))
		g.Expect(rule.APIGroups).NotTo(ContainElement("*"))
		for _, grp := range rule.APIGroups {
			for _, res := range rule.Resources {
				granted[grp+"/"+res] = true
			}
		}
	}
	for _, never := range []string{"batch/jobs", "batch/cronjobs", "/pods", "/secrets", "/persistentvolumeclaims"} {
		g.Expect(granted).NotTo(HaveKey(never))
	}
	for _, needed := range []string{"backup.cairn.dev/backupjobs", "restore.cairn.dev/restorejobs", "platform.cairn.dev/protectionplans/status"} {
		g.Expect(granted).To(HaveKey(needed))
	}
}
