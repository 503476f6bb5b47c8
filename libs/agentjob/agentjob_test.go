package agentjob

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}

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
	// Several failed pods, listed newest first: the newest failure is reported.
	r, failure, err = PodResult([]corev1.Pod{
		terminated(`{"error":"backup: the newest failure"}`, 1, now),
		terminated(`{"error":"backup: an older failure"}`, 1, now.Add(-time.Minute)),
	})
	if err != nil || r != nil || !strings.Contains(failure, "the newest failure") {
		t.Fatalf("newest failure: %+v %q %v", r, failure, err)
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
	if o := JobOutcome(j); o.NotRetried {
		t.Fatalf("a job that used its retries reported NotRetried: %+v", o)
	}
	// Failed by the pod failure policy: reason and message as the Job
	// controller wrote them.
	const msg = "Container agent for pod ns/bj-now-1-abcde failed with exit code 3 matching FailJob rule at index 0"
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: msg, LastTransitionTime: at},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: msg, LastTransitionTime: at},
	}
	if o := JobOutcome(j); !o.Finished || o.Succeeded || !o.NotRetried || o.Reason != "PodFailurePolicy" || o.Message != msg {
		t.Fatalf("job failed by its pod failure policy: %+v", o)
	}
	// FailureTarget alone: the Job controller has decided, but pods are
	// still terminating; not finished yet.
	j.Status.Conditions = j.Status.Conditions[:1]
	if o := JobOutcome(j); o.Finished {
		t.Fatalf("job with only FailureTarget reported finished: %+v", o)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: at}}
	if o := JobOutcome(j); !o.Finished || !o.Succeeded {
		t.Fatalf("complete job: %+v", o)
	}
}

// Every agent Job fails at once when the agent exits with a code retrying
// cannot fix, and does not count disrupted pods against its backoffLimit.
func TestPodFailurePolicy(t *testing.T) {
	if contract.ExitUsage != 2 || contract.ExitCorrupted != 3 || contract.ExitUnsupported != 4 {
		t.Fatalf("the agent's exit codes changed: usage %d, corrupted %d, unsupported %d", contract.ExitUsage, contract.ExitCorrupted, contract.ExitUnsupported)
	}
	js := JobSpec(spec(s3))
	p := js.PodFailurePolicy
	if p == nil || len(p.Rules) != 2 {
		t.Fatalf("podFailurePolicy %+v", p)
	}
	fail, ignore := p.Rules[0], p.Rules[1]
	if fail.Action != batchv1.PodFailurePolicyActionFailJob || fail.OnExitCodes == nil ||
		ptr.Deref(fail.OnExitCodes.ContainerName, "") != js.Template.Spec.Containers[0].Name ||
		fail.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn ||
		!slices.Equal(fail.OnExitCodes.Values, []int32{2, 3, 4}) {
		t.Errorf("rule 0 %+v: want FailJob on exit codes In [2 3 4] of the agent container", fail)
	}
	if ignore.Action != batchv1.PodFailurePolicyActionIgnore || len(ignore.OnPodConditions) != 1 ||
		ignore.OnPodConditions[0].Type != corev1.DisruptionTarget || ignore.OnPodConditions[0].Status != corev1.ConditionTrue {
		t.Errorf("rule 1 %+v: want Ignore on DisruptionTarget", ignore)
	}
	if js.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q: a pod failure policy needs Never", js.Template.Spec.RestartPolicy)
	}
}

// The API server accepts the policy in a Job and in a CronJob's template
// and stores it as rendered (nothing defaulted), so operators comparing
// rendered and stored specs see no drift.
func TestPodFailurePolicyAccepted(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "agentjob")
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]cairnv1.StorageSpec{"pvc": pvc, "s3": s3} {
		s := spec(st)
		s.BackoffLimit, s.ActiveDeadlineSeconds = ptr.To[int32](3), ptr.To[int64](600)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run-" + name}, Spec: JobSpec(s)}
		if err := env.Client.Create(ctx, job); err != nil {
			t.Fatalf("%s: create Job: %v", name, err)
		}
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cron-" + name}, Spec: batchv1.CronJobSpec{
			Schedule: "0 0 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: JobSpec(s)},
		}}
		if err := env.Client.Create(ctx, cj); err != nil {
			t.Fatalf("%s: create CronJob: %v", name, err)
		}
		gotJob, gotCJ := &batchv1.Job{}, &batchv1.CronJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), gotJob); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cj), gotCJ); err != nil {
			t.Fatal(err)
		}
		for what, got := range map[string]*batchv1.PodFailurePolicy{"Job": gotJob.Spec.PodFailurePolicy, "CronJob": gotCJ.Spec.JobTemplate.Spec.PodFailurePolicy} {
			if !apiequality.Semantic.DeepEqual(got, PodFailurePolicy()) {
				t.Errorf("%s: %s stored podFailurePolicy %+v, rendered %+v", name, what, got, PodFailurePolicy())
			}
		}
	}
}

// The S3 part size reaches the agent only when the spec sets it (the agent's
// own default otherwise).
func TestS3PartSize(t *testing.T) {
	envOf := func(st cairnv1.StorageSpec) map[string]string {
		out := map[string]string{}
		for _, e := range PodTemplate(spec(st)).Spec.Containers[0].Env {
			out[e.Name] = e.Value
		}
		return out
	}
	if v, ok := envOf(s3)["CAIRN_S3_PART_SIZE_MIB"]; ok {
		t.Errorf("part size set without a spec value: %q", v)
	}
	big := *s3.DeepCopy()
	big.S3.PartSizeMiB = ptr.To[int32](64)
	if v := envOf(big)["CAIRN_S3_PART_SIZE_MIB"]; v != "64" {
		t.Errorf("CAIRN_S3_PART_SIZE_MIB = %q, want 64", v)
	}
}

// CAIRN_PARALLELISM: the spec's value, else the CPU limit in whole CPUs
// (at least 1, at most 64), else not rendered (the agent's default, 1).
func TestParallelism(t *testing.T) {
	envOf := func(s Spec) (string, bool) {
		for _, e := range PodTemplate(s).Spec.Containers[0].Env {
			if e.Name == contract.EnvParallelism {
				return e.Value, true
			}
		}
		return "", false
	}
	cpu := func(q string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	withSpec := func(p int32, r *corev1.ResourceRequirements) Spec {
		s := spec(pvc)
		s.Command, s.Parallelism, s.Resources = contract.CommandRestore, p, r
		return s
	}
	if v, ok := envOf(spec(pvc)); ok {
		t.Errorf("rendered %q without a spec value or a CPU limit", v)
	}
	// A backup is parallel only when asked (spec.parallelism), never from
	// its CPU limit alone.
	backup := spec(pvc)
	backup.Command, backup.Resources = contract.CommandBackup, cpu("4")
	if v, ok := envOf(backup); ok {
		t.Errorf("a backup with a CPU limit rendered %s=%q without spec.parallelism", contract.EnvParallelism, v)
	}
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{withSpec(3, nil), "3"},
		{withSpec(2, cpu("8")), "2"},
		{withSpec(0, cpu("4")), "4"},
		{withSpec(0, cpu("2500m")), "2"},
		{withSpec(0, cpu("500m")), "1"},
		{withSpec(0, cpu("200")), "64"},
	} {
		if v, _ := envOf(c.s); v != c.want {
			t.Errorf("parallelism %d, limits %v: %s = %q, want %q", c.s.Parallelism, c.s.Resources.Limits, contract.EnvParallelism, v, c.want)
		}
	}
}

// Recipients come from a Secret or ConfigMap key and the identity from a
// Secret key, by reference: no key material in the Pod spec; both are
// references a run waits for.
func TestEncryptionRendering(t *testing.T) {
	backup := spec(pvc)
	backup.Encryption = BackupEncryption(&cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "team-keys", Key: "recipients"}}})
	env := PodTemplate(backup).Spec.Containers[0].Env
	got := find(env, contract.EnvEncryptionRecipients)
	if got == nil || got.Value != "" || got.ValueFrom == nil || got.ValueFrom.ConfigMapKeyRef == nil ||
		got.ValueFrom.ConfigMapKeyRef.Name != "team-keys" || got.ValueFrom.ConfigMapKeyRef.Key != "recipients" {
		t.Fatalf("recipients rendered as %+v", got)
	}
	if find(env, contract.EnvEncryptionIdentity) != nil {
		t.Fatal("a backup renders an identity")
	}
	restore := spec(pvc)
	restore.Command = contract.CommandRestore
	restore.Encryption = RestoreEncryption(&cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "dr-key", Key: "identity"}})
	id := find(PodTemplate(restore).Spec.Containers[0].Env, contract.EnvEncryptionIdentity)
	if id == nil || id.Value != "" || id.ValueFrom == nil || id.ValueFrom.SecretKeyRef == nil ||
		id.ValueFrom.SecretKeyRef.Name != "dr-key" || id.ValueFrom.SecretKeyRef.Key != "identity" {
		t.Fatalf("identity rendered as %+v", id)
	}
	refs := EncryptionReferences("ns", restore.Encryption, "spec.encryption")
	if len(refs) != 1 || refs[0].Name != "dr-key" || len(refs[0].Keys) != 1 || refs[0].Keys[0] != "identity" || refs[0].Field != "spec.encryption.identitySecretRef" {
		t.Fatalf("identity references %+v", refs)
	}
	refs = EncryptionReferences("ns", backup.Encryption, "spec.encryption")
	if len(refs) != 1 || refs[0].Kind != "ConfigMap" || refs[0].Name != "team-keys" {
		t.Fatalf("recipients references %+v", refs)
	}
	if BackupEncryption(nil) != nil || RestoreEncryption(nil) != nil || EncryptionReferences("ns", nil, "x") != nil {
		t.Fatal("no encryption renders something")
	}
}

func find(env []corev1.EnvVar, name string) *corev1.EnvVar {
	for i := range env {
		if env[i].Name == name {
			return &env[i]
		}
	}
	return nil
}
