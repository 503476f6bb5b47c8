package controller_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
)

// installVolumePolicies applies the platform's cairn-backup-claim-writes
// and cairn-backup-volume-writes policies (deploy/backup/admission), so
// the operator's own writes to claims and volumes go through them — with
// the operator's namespace of these tests for cairn-system.
func installVolumePolicies(ctx context.Context) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy/backup/admission/volume_writes_policy.yaml"))
	if err != nil {
		return err
	}
	raw = []byte(strings.NewReplacer("request.namespace == 'cairn-system'", "request.namespace == '"+operatorNamespace+"'",
		"'cairn-system/cairn-backup-delete-", "'"+operatorNamespace+"/cairn-backup-delete-").Replace(string(raw)))
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err != nil {
			return nil
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
}

// boundClaim makes claim name in ns and a volume bound to it (as the
// PersistentVolume controller leaves them: there is none here).
func boundClaim(t *testing.T, ns, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	size := resource.MustParse("1Gi")
	pvName := ns + "-" + name
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""), VolumeName: pvName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	pv := boundVolume(g, pvName, claim)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	return claim, pv
}

// boundVolume makes volume name bound to claim.
func boundVolume(g Gomega, name string, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	ctx := context.Background()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + name}},
		},
	}
	g.Expect(env.Client.Create(ctx, pv)).To(Succeed())
	pv.Status.Phase = corev1.VolumeBound
	g.Expect(env.Client.Status().Update(ctx, pv)).To(Succeed())
	return pv
}

// pvcBackupJob makes a Delete-policy BackupJob on claim "backups" and waits
// until the claim is held by the operator's finalizer.
func pvcBackupJob(t *testing.T, ns string) client.ObjectKey {
	t.Helper()
	g := NewWithT(t)
	bj := backupJob(ns, "orders")
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	bj.Spec.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "cairn"}}
	create(t, bj)
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)
	g.Eventually(func(g Gomega) {
		c := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "backups"}, c)).To(Succeed())
		g.Expect(c.Finalizers).To(ContainElement(controller.CredentialsFinalizer))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return key
}

// A Delete-policy BackupJob on a PVC store whose namespace is deleted still
// deletes its artifacts (issue 30): the claim is kept by the operator's
// finalizer while the namespace is swept, its volume is bound to a claim
// of the operator's namespace (checked: the volume is the claim's own, by
// UID), the delete Job runs there on it, and afterwards the volume is bound
// back to the tenant's claim, the operator's claim deleted and the claim
// released — every write through the platform's admission policies.
// Before, cleanup ended at once with ArtifactsNotDeleted.
func TestNamespaceDeletionPVCStoreDeletesFromTheOperatorNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	claim, pv := boundClaim(t, ns, "backups")
	key := pvcBackupJob(t, ns)

	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, claim.DeepCopy())).To(Succeed())
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())

	var job *batchv1.Job
	g.Eventually(func(g Gomega) { job = jobElsewhere(g, ns) }).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"delete"}))
	var ownName string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			ownName = v.PersistentVolumeClaim.ClaimName
		}
	}
	g.Expect(ownName).To(HavePrefix("cairn-backup-delete-"))
	own := &corev1.PersistentVolumeClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: ownName}, own)).To(Succeed())
	g.Expect(own.Spec.VolumeName).To(Equal(pv.Name))
	live := &corev1.PersistentVolume{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pv), live)).To(Succeed())
	g.Expect(live.Spec.ClaimRef.Namespace).To(Equal(operatorNamespace))
	g.Expect(live.Spec.ClaimRef.Name).To(Equal(ownName))
	g.Expect(live.Spec.ClaimRef.UID).To(Equal(own.UID))
	g.Expect(live.Annotations).To(HaveKeyWithValue(controller.ClaimOfAnnotation, ns+"/backups/"+string(claim.UID)))
	// The tenant's claim is kept while the delete runs.
	g.Consistently(func(g Gomega) {
		c := &corev1.PersistentVolumeClaim{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), c)).To(Succeed())
		g.Expect(c.Finalizers).To(ContainElement(controller.CredentialsFinalizer))
	}).WithTimeout(2 * time.Second).Should(Succeed())

	finishJob(g, job, metav1.Now(), true, "")
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))).To(BeTrue(), "BackupJob still there")
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pv), live)).To(Succeed())
		g.Expect(live.Annotations).NotTo(HaveKey(controller.ClaimOfAnnotation))
		g.Expect(live.Spec.ClaimRef.Namespace).To(Equal(ns))
		g.Expect(live.Spec.ClaimRef.Name).To(Equal("backups"))
		g.Expect(live.Spec.ClaimRef.UID).To(Equal(claim.UID))
		// There is no pvc-protection controller here: deleted claims stay
		// Terminating on its finalizer.
		o := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), o)
		g.Expect(apierrors.IsNotFound(err) || !o.DeletionTimestamp.IsZero()).To(BeTrue(), "the operator's claim was not deleted")
		c := &corev1.PersistentVolumeClaim{}
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(claim), c)
		g.Expect(apierrors.IsNotFound(err) || !controllerutil.ContainsFinalizer(c, controller.CredentialsFinalizer)).To(BeTrue(), "the tenant's claim is still held")
		j := &batchv1.Job{}
		err = env.Client.Get(ctx, client.ObjectKeyFromObject(job), j)
		g.Expect(apierrors.IsNotFound(err) || !j.DeletionTimestamp.IsZero()).To(BeTrue(), "delete Job not deleted")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// A tenant's claim that names a volume bound to another namespace's claim
// (spec.volumeName can name any volume; the claim then stays Pending) is
// never rebound for the delete: the volume is not the claim's own. Cleanup
// ends with ArtifactsNotDeleted, and the other namespace's volume is left
// exactly as it was.
func TestNamespaceDeletionPVCStoreNeverTakesAnotherNamespacesVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	victimNS := newNamespace(t)
	_, victim := boundClaim(t, victimNS, "data")
	ns := newNamespace(t)
	size := resource.MustParse("1Gi")
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""), VolumeName: victim.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	key := pvcBackupJob(t, ns)
	before := &corev1.PersistentVolume{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), before)).To(Succeed())

	env.TerminateNamespace(t, ns)
	g.Expect(env.Client.Delete(ctx, claim.DeepCopy())).To(Succeed())
	g.Expect(env.Client.Delete(ctx, get(g, key))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, key, &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		note := namespaceEvent(g, ns, "ArtifactsNotDeleted")
		g.Expect(note).To(ContainSubstring("is not bound to the claim " + ns + "/backups"))
		g.Expect(note).To(ContainSubstring("PVC backups/cairn"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	after := &corev1.PersistentVolume{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the other namespace's volume was written")
	list := &corev1.PersistentVolumeClaimList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(operatorNamespace))).To(Succeed())
	for _, c := range list.Items {
		g.Expect(c.Spec.VolumeName).NotTo(Equal(victim.Name), "a claim was made for the other namespace's volume")
	}
	g.Expect(testenv.Jobs(g, env.Client, operatorNamespace, client.MatchingLabels{controller.ForNamespaceLabel: ns})).To(BeEmpty())
	// The claim's hold is released by its own releaser once no BackupJob
	// needs it: eventually, not with the BackupJob's deletion.
	g.Eventually(func() bool {
		c := &corev1.PersistentVolumeClaim{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), c)
		return apierrors.IsNotFound(err) || !strings.Contains(strings.Join(c.Finalizers, ","), controller.CredentialsFinalizer)
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the claim is still held")
}
