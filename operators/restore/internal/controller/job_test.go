package controller

import (
	"cairn.dev/agent/contract"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

func TestDesiredJob(t *testing.T) {
	rj := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "verify"},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}},
			Target: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Host: "scratch", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"}},
		},
	}
	spec := *rj.Spec.DeepCopy()
	spec.SetDefaults()
	src := source{
		Storage:    cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}},
		CatalogKey: "shop/orders-db",
		Artifact:   cairnv1.Artifact{Path: "shop/orders-db/shop_orders-db_20260102T030405.123Z.sql.zst"},
	}
	job := desiredJob(rj, &spec, src, "agent:1")

	if job.Name != "verify-restore" || job.Namespace != "shop" {
		t.Errorf("Job %s/%s, want shop/verify-restore", job.Namespace, job.Name)
	}
	for _, lbls := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if lbls[ManagedByLabel] != ManagedByValue || lbls[restorev1.RestoreJobLabel] != "verify" {
			t.Errorf("labels %v lack the managed-by and owner labels", lbls)
		}
	}
	if *job.Spec.BackoffLimit != 3 || *job.Spec.ActiveDeadlineSeconds != 3600 {
		t.Errorf("backoffLimit %d, activeDeadlineSeconds %d; want the defaults 3 and 3600", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds)
	}
	want := map[string]string{
		"CAIRN_ARTIFACT":  src.Artifact.Path,
		"CAIRN_BACKUPJOB": "shop/orders-db",
		"CAIRN_ENGINE":    "mysql",
		"CAIRN_DB_PORT":   "3306",
		"CAIRN_STORE":     "pvc",
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
		if e.Name == "CAIRN_DB_PASSWORD" && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "scratch-credentials") {
			t.Errorf("the password must come from the Secret reference: %+v", e)
		}
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if got := jobArtifact(job); got != src.Artifact.Path {
		t.Errorf("jobArtifact = %q, want %q", got, src.Artifact.Path)
	}
	if args := job.Spec.Template.Spec.Containers[0].Args; len(args) != 1 || args[0] != "restore" {
		t.Errorf("args %v, want [restore]", args)
	}
}

func TestDescribeSource(t *testing.T) {
	cases := []struct {
		src  restorev1.RestoreSource
		want string
	}{
		{restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}}, "backupjob/orders-db"},
		{restorev1.RestoreSource{Store: &restorev1.StoreSource{BackupJob: "shop/orders-db",
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Bucket: "b", Prefix: "prod"}}}}, "s3://b/prod shop/orders-db"},
		{restorev1.RestoreSource{Store: &restorev1.StoreSource{BackupJob: "shop/orders-db",
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "x"}}}}, "pvc/backups/x shop/orders-db"},
	}
	for _, tc := range cases {
		rj := &restorev1.RestoreJob{Spec: restorev1.RestoreJobSpec{Source: tc.src}}
		if got := describeSource(rj); got != tc.want {
			t.Errorf("describeSource = %q, want %q", got, tc.want)
		}
	}
}

// Checks and the drop flag reach the agent container as CAIRN_CHECKS (JSON)
// and CAIRN_DROP_TARGET_AFTER_CHECKS; without them neither is set.
func TestDesiredJobPassesChecks(t *testing.T) {
	one := int64(1)
	rj := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "verify"},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders-db"}},
			Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "scratch", Port: 5432, Database: "orders_verify",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"}},
			Checks:                []restorev1.Check{{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: &one}},
			DropTargetAfterChecks: true,
		},
	}
	src := source{Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}, CatalogKey: "shop/orders-db",
		Artifact: cairnv1.Artifact{Path: "a.pgdump.zst"}}
	envOf := func(rj *restorev1.RestoreJob) map[string]string {
		spec := *rj.Spec.DeepCopy()
		spec.SetDefaults()
		env := map[string]string{}
		for _, e := range desiredJob(rj, &spec, src, "agent:1").Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		return env
	}
	env := envOf(rj)
	if got, want := env[contract.EnvChecks], `[{"name":"has-orders","sql":"select count(*) from orders","atLeast":1}]`; got != want {
		t.Errorf("%s=%s, want %s", contract.EnvChecks, got, want)
	}
	if env[contract.EnvDropTargetAfterChecks] != "true" {
		t.Errorf("%s=%q, want true", contract.EnvDropTargetAfterChecks, env[contract.EnvDropTargetAfterChecks])
	}
	rj.Spec.Checks, rj.Spec.DropTargetAfterChecks = nil, false
	env = envOf(rj)
	for _, k := range []string{contract.EnvChecks, contract.EnvDropTargetAfterChecks, contract.EnvAllowOverwriteSource} {
		if _, ok := env[k]; ok {
			t.Errorf("%s set without checks", k)
		}
	}
	// The agent refuses to restore over the backup's source unless told.
	rj.Spec.AllowOverwriteSource = true
	if env = envOf(rj); env[contract.EnvAllowOverwriteSource] != "true" {
		t.Errorf("%s=%q with allowOverwriteSource, want true", contract.EnvAllowOverwriteSource, env[contract.EnvAllowOverwriteSource])
	}
	// spec.parallelism: parts loaded at once.
	if _, ok := env[contract.EnvParallelism]; ok {
		t.Errorf("%s set without spec.parallelism or a CPU limit", contract.EnvParallelism)
	}
	p := int32(4)
	rj.Spec.Parallelism = &p
	if env = envOf(rj); env[contract.EnvParallelism] != "4" {
		t.Errorf("%s=%q with parallelism 4", contract.EnvParallelism, env[contract.EnvParallelism])
	}
}
