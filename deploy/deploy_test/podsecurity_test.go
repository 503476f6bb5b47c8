package deploy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
)

var restricted = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}

func evaluate(t *testing.T, what string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range eval.EvaluatePod(restricted, meta, spec) {
		n++
		if !r.Allowed {
			t.Errorf("%s: restricted Pod Security violated: %s: %s", what, r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	if n == 0 {
		t.Fatalf("%s: the evaluator ran no check", what)
	}
}

// TestDeploymentsAreRestricted evaluates every workload template of every
// build against the restricted profile.
func TestDeploymentsAreRestricted(t *testing.T) {
	for name, objs := range allBuilds(t) {
		ds := ofKind(objs, "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
		if len(ds) == 0 {
			t.Errorf("%s: no workload", name)
		}
		for _, d := range ds {
			tpl, found, err := unstructured.NestedMap(d.Object, "spec", "template")
			if !found || err != nil {
				t.Fatalf("%s: %s %s has no pod template", name, d.GetKind(), d.GetName())
			}
			var pod corev1.PodTemplateSpec
			into(t, &unstructured.Unstructured{Object: tpl}, &pod)
			evaluate(t, name+": "+d.GetKind()+" "+d.GetName(), &pod.ObjectMeta, &pod.Spec)
		}
	}
}

// TestAgentPodsAreRestricted evaluates the pod templates the backup operator
// (backup runs of its CronJob, and delete/prune cleanup Jobs) and the restore
// operator (restore Jobs) render, all through libs/agentjob, for both stores.
func TestAgentPodsAreRestricted(t *testing.T) {
	db := &cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db", Port: 5432, Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"}}
	stores := map[string]cairnv1.StorageSpec{
		"pvc": {PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "orders"}},
		"s3":  {S3: &cairnv1.S3Storage{Endpoint: "s3.example.com", Bucket: "b", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}},
	}
	for storeName, st := range stores {
		for _, s := range []agentjob.Spec{
			{Command: "backup", Database: db, RetentionDays: 14},
			{Command: "restore", Database: db, Artifact: "orders/2026-01-01.dump.zst"},
			{Command: "delete"},
			{Command: "prune", RetentionDays: 14},
		} {
			s.Image, s.CatalogKey, s.Storage = "ghcr.io/cairn-dev/agent:v0.1.0", "default/orders-db", st
			s.BackoffLimit, s.ActiveDeadlineSeconds = ptr.To[int32](2), ptr.To[int64](3600)
			job := agentjob.JobSpec(s)
			evaluate(t, s.Command+"/"+storeName, &job.Template.ObjectMeta, &job.Template.Spec)
		}
	}
}
