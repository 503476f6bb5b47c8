package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// A BackupJob name (at most 52 characters) whose cut lands just after a '.'
// or a '-' still gives valid, distinct run-now and delete Job names: the
// cut never leaves a '.' or '-' before the suffix, and the hash suffix of
// the whole name (or UID) keeps names that share their cut apart.
func TestChildJobNamesOfLongNames(t *testing.T) {
	bj := func(name, uid string) *backupv1.BackupJob {
		return &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + uid)},
			Spec: backupv1.BackupJobSpec{Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Bucket: "b"}}}}
	}
	seen := map[string]string{}
	for i, name := range []string{
		strings.Repeat("a", 46) + ".bcdef",   // run-now cut (47) ends in '.'
		strings.Repeat("a", 46) + "-bcdef",   // ... in '-'
		strings.Repeat("a", 44) + ".bcdefgh", // delete cut (45) ends in '.'
		strings.Repeat("a", 44) + "-bcdefgh", // ... in '-'
		strings.Repeat("a", 44) + "---bcdef", // both cuts in one or several
		strings.Repeat("b", 52),
		strings.Repeat("b", 51) + "c", // same cuts as the one above
	} {
		if errs := validation.IsDNS1123Subdomain(name); len(name) > 52 || len(errs) != 0 {
			t.Fatalf("test name %q is not a valid BackupJob name: %d characters, %v", name, len(name), errs)
		}
		b := bj(name, strings.Repeat("x", i))
		for _, job := range []string{runNowJob(b, "agent:1", "req-1").Name, deleteJob(b, "agent:1").Name} {
			if errs := validation.IsDNS1123Subdomain(job); len(errs) != 0 {
				t.Errorf("BackupJob %q: Job name %q: %v", name, job, errs)
			}
			if strings.Contains(job, ".-") || strings.Contains(job, "--") {
				t.Errorf("BackupJob %q: Job name %q has a cut ending in '.' or '-'", name, job)
			}
			if other, ok := seen[job]; ok {
				t.Errorf("BackupJobs %q and %q share the Job name %q", other, name, job)
			}
			seen[job] = name
		}
	}
}
