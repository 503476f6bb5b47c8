package agentjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func spec(storage cairnv1.StorageSpec) Spec {
	return Spec{
		Command: "backup", Image: "agent:1", CatalogKey: "ns/bj",
		Database: &cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db", Port: 5432, Database: "app",
			CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db-creds"}},
		Storage: storage, RetentionDays: 7, Labels: map[string]string{"a": "b"},
	}
}

var (
	pvc = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "x"}}
	s3  = cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3:9000", Bucket: "bkt", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-creds"}}}
)

func TestPodTemplateIsRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]cairnv1.StorageSpec{"pvc": pvc, "s3": s3} {
		tpl := PodTemplate(spec(st))
		res := eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &tpl.ObjectMeta, &tpl.Spec)
		for _, r := range res {
			if !r.Allowed {
				t.Errorf("%s: restricted profile violated: %s: %s", name, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
	}
}

func TestCredentialsOnlyFromSecrets(t *testing.T) {
	for name, st := range map[string]cairnv1.StorageSpec{"pvc": pvc, "s3": s3} {
		tpl := PodTemplate(spec(st))
		c := tpl.Spec.Containers[0]
		secretVars := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secretVars[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		if secretVars["CAIRN_DB_PASSWORD"] != "db-creds/password" || secretVars["CAIRN_DB_USER"] != "db-creds/username" {
			t.Errorf("%s: database credentials %v", name, secretVars)
		}
		if name == "s3" && (secretVars["AWS_SECRET_ACCESS_KEY"] != "s3-creds/secretAccessKey" || secretVars["AWS_ACCESS_KEY_ID"] != "s3-creds/accessKeyID") {
			t.Errorf("s3 credentials %v", secretVars)
		}
		if len(c.Args) != 1 || c.Args[0] != "backup" {
			t.Errorf("%s: args %v: nothing but the command", name, c.Args)
		}
	}
	tpl := PodTemplate(spec(pvc))
	if v := tpl.Spec.Volumes[1]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "backups" {
		t.Errorf("pvc volume %+v", v)
	}
}

func terminated(msg string, code int32, at time.Time) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, FinishedAt: metav1.NewTime(at)}},
	}}}}
}

func TestPodResult(t *testing.T) {
	now := time.Now()
	ok := `{"artifact":"a/b.zst","size":10,"checksum":"sha256:00","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:00:01Z","durationSeconds":1,"engine":"postgres"}`
	r, failure, err := PodResult([]corev1.Pod{terminated(`{"error":"backup: connection refused"}`, 1, now.Add(-time.Minute)), terminated(ok, 0, now)})
	if err != nil || r == nil || r.Artifact != "a/b.zst" || failure == "" {
		t.Fatalf("PodResult = %+v %q %v", r, failure, err)
	}
	if a := Artifact(r); a.Path != "a/b.zst" || a.Size != 10 || a.Checksum != "sha256:00" {
		t.Fatalf("Artifact = %+v", a)
	}
	r, failure, err = PodResult([]corev1.Pod{terminated(`{"error":"backup: connection refused"}`, 1, now)})
	if err != nil || r != nil || failure == "" {
		t.Fatalf("failure only: %+v %q %v", r, failure, err)
	}
	if _, _, err = PodResult(nil); err == nil {
		t.Fatal("no pods: want an error")
	}
}

func TestJobOutcome(t *testing.T) {
	at := metav1.Now()
	j := &batchv1.Job{}
	if o := JobOutcome(j); o.Finished {
		t.Fatal("running job reported finished")
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: at}}
	if o := JobOutcome(j); !o.Finished || o.Succeeded || o.Reason != "BackoffLimitExceeded" {
		t.Fatalf("failed job: %+v", o)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at}}
	if o := JobOutcome(j); !o.Finished || !o.Succeeded {
		t.Fatalf("complete job: %+v", o)
	}
}
