package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const claimOfAnnotation = "backup.cairn.dev/claim-of"

// TestBackupVolumeWritesPolicy: the ValidatingAdmissionPolicies
// cairn-backup-claim-writes and cairn-backup-volume-writes, on a real API
// server, let the backup operator's ServiceAccount (whose manager role has
// patch, create and delete on claims and get and patch on volumes, issue
// 30) do exactly what a PVC store's artifact delete in a namespace being
// deleted needs — hold a claim with its finalizer, make a claim
// cairn-system/cairn-backup-delete-* naming the claim's volume, point the
// volume at it while recording the tenant claim, point it back at exactly
// that claim, delete its claim — with the patches the operator sends, and
// refuse everything else: a claim's spec or labels, another finalizer,
// claims elsewhere or without a volume, a volume's reclaim policy, a
// rebinding that records nothing or the wrong claim, of a volume that is
// not Bound, to a claim that is not its own, back to another claim, a
// volume's create or delete — even with cluster-admin's rules.
func TestBackupVolumeWritesPolicy(t *testing.T) {
	ctx := t.Context()
	installPlatform(t)
	ns := newNamespace(ctx, t, "bvolume")
	op := clientAs(t, operatorUser("backup"), saGroups...)
	size := resource.MustParse("1Gi")
	newClaim := func(ns, name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "shop"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""), VolumeName: volume,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}
	}
	// volume makes a volume bound to claim, with phase.
	volume := func(name string, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumePhase) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "fast"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
					Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/" + name}},
			},
		}
		if err := env.Client.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
		pv.Status.Phase = phase
		if err := env.Client.Status().Update(ctx, pv); err != nil {
			t.Fatal(err)
		}
		return pv
	}
	tenant := newClaim(ns, "backups", ns+"-backups")
	if err := env.Client.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	pv := volume(ns+"-backups", tenant, corev1.VolumeBound)
	loose := newClaim(ns, "loose", ns+"-loose")
	if err := env.Client.Create(ctx, loose); err != nil {
		t.Fatal(err)
	}
	released := volume(ns+"-loose", loose, corev1.VolumeReleased)

	refused := func(what string, err error, want string) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: allowed", what)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want refused by the policy", what, err)
		case !strings.Contains(err.Error(), want):
			t.Errorf("%s: refused with %q, want a message with %q", what, err, want)
		}
	}
	// claimMeta patches a claim's metadata as the operator does (a merge
	// patch with the optimistic lock).
	claimMeta := func(key client.ObjectKey, mutate func(*corev1.PersistentVolumeClaim)) error {
		c := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(ctx, key, c); err != nil {
			t.Fatal(err)
		}
		base := c.DeepCopy()
		mutate(c)
		return op.Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}
	// rebind sends the operator's merge patch of a volume: claimRef to
	// ns/name/uid, the annotation set (record) or removed (""), with the
	// optimistic lock; extra adds to spec.
	rebind := func(pv *corev1.PersistentVolume, ns, name string, uid types.UID, record string, extra map[string]any) error {
		live := &corev1.PersistentVolume{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), live); err != nil {
			t.Fatal(err)
		}
		var ann any
		if record != "" {
			ann = record
		}
		spec := map[string]any{"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1",
			"namespace": ns, "name": name, "uid": string(uid), "resourceVersion": nil}}
		for k, v := range extra {
			spec[k] = v
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{claimOfAnnotation: ann}, "resourceVersion": live.ResourceVersion},
			"spec":     spec,
		})
		if err != nil {
			t.Fatal(err)
		}
		return op.Patch(ctx, live, client.RawPatch(types.MergePatchType, body))
	}
	tk := client.ObjectKeyFromObject(tenant)

	// The policies are compiled in the background: wait until one refuses
	// a label change of the claim (before, RBAC alone lets it through).
	const notClaim = "may not change a claim's spec, labels"
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = claimMeta(tk, func(c *corev1.PersistentVolumeClaim) { c.Labels["probe"] = time.Now().Format("150405.000000") })
		return last != nil && strings.Contains(last.Error(), notClaim), nil
	})
	if err != nil {
		t.Fatalf("changing a claim's labels was not refused by the policy: %v", last)
	}
	const notVolume = "may change only a volume's claimRef"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = rebind(pv, ns, "backups", tenant.UID, "", map[string]any{"persistentVolumeReclaimPolicy": "Delete"})
		return last != nil && strings.Contains(last.Error(), notVolume), nil
	})
	if err != nil {
		t.Fatalf("changing a volume's reclaim policy was not refused by the policy: %v", last)
	}

	// What the operator does is allowed.
	if err := claimMeta(tk, func(c *corev1.PersistentVolumeClaim) { c.Finalizers = append(c.Finalizers, artifactDeleteFinalizer) }); err != nil {
		t.Fatalf("holding the claim: %v", err)
	}
	own := newClaim("cairn-system", "cairn-backup-delete-0123456789abcdef", pv.Name)
	own.Labels = nil
	if err := op.Create(ctx, own); err != nil {
		t.Fatalf("creating its claim: %v", err)
	}
	record := ns + "/backups/" + string(tenant.UID)
	const onlyBind = "may only bind a Bound volume to its own claim"
	refused("rebind recording nothing", rebind(pv, own.Namespace, own.Name, own.UID, "", nil), onlyBind)
	refused("rebind recording another claim", rebind(pv, own.Namespace, own.Name, own.UID, ns+"/loose/"+string(loose.UID), nil), onlyBind)
	refused("rebind to a claim that is not its own", rebind(pv, ns, "loose", loose.UID, record, nil), onlyBind)
	refused("rebind and change the reclaim policy", rebind(pv, own.Namespace, own.Name, own.UID, record,
		map[string]any{"persistentVolumeReclaimPolicy": "Delete"}), notVolume)
	refused("rebind a volume that is not Bound (a Released one)", rebind(released, own.Namespace, own.Name, own.UID,
		ns+"/loose/"+string(loose.UID), nil), onlyBind)
	if err := rebind(pv, own.Namespace, own.Name, own.UID, record, nil); err != nil {
		t.Fatalf("binding the volume to its claim: %v", err)
	}
	refused("bind it on to another claim", rebind(pv, ns, "loose", loose.UID, "", nil), onlyBind)
	refused("bind it back keeping the record", rebind(pv, ns, "backups", tenant.UID, record, nil), onlyBind)
	if err := rebind(pv, ns, "backups", tenant.UID, "", nil); err != nil {
		t.Fatalf("binding the volume back: %v", err)
	}
	if err := op.Delete(ctx, own.DeepCopy()); err != nil {
		t.Fatalf("deleting its claim: %v", err)
	}

	const onlyOwnClaims = "only its own claims"
	refused("create a claim in a tenant's namespace", op.Create(ctx, newClaim(ns, "cairn-backup-delete-x", pv.Name)), onlyOwnClaims)
	refused("create another claim in cairn-system", op.Create(ctx, newClaim("cairn-system", "planted", pv.Name)), onlyOwnClaims)
	refused("create its claim without a volume", op.Create(ctx, newClaim("cairn-system", "cairn-backup-delete-novolume", "")), "must name the volume")
	refused("delete a tenant's claim", op.Delete(ctx, loose.DeepCopy()), onlyOwnClaims)
	refused("another finalizer on a claim", claimMeta(tk, func(c *corev1.PersistentVolumeClaim) {
		c.Finalizers = append(c.Finalizers, "evil.example/hold")
	}), "only its own finalizer")
	refused("annotate a claim", claimMeta(tk, func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "evil"}
	}), notClaim)
	refused("drop another finalizer of a claim (pvc-protection)", claimMeta(tk, func(c *corev1.PersistentVolumeClaim) {
		controllerutil.RemoveFinalizer(c, "kubernetes.io/pvc-protection")
	}), "only its own finalizer")
	refused("label a volume", func() error {
		live := &corev1.PersistentVolume{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), live); err != nil {
			t.Fatal(err)
		}
		base := live.DeepCopy()
		live.Labels["tier"] = "evil"
		return op.Patch(ctx, live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}(), notVolume)

	// A compromised or over-granted operator: cluster-admin's rules
	// everywhere. RBAC now allows everything; the policies still refuse.
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-operator-admin-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{saSubject("backup")},
	}
	if err := env.Client.Create(ctx, crb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crb) })
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return can(ctx, t, operatorUser("backup"), saGroups, "delete", "", "persistentvolumes", ""), nil
	})
	if err != nil {
		t.Fatal("admin was not granted")
	}
	refused("delete a volume as admin", op.Delete(ctx, pv.DeepCopy()), "may not create or delete volumes")
	planted := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-planted"}, Spec: *pv.Spec.DeepCopy()}
	planted.Spec.ClaimRef = nil
	planted.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/"}
	refused("create a volume as admin", op.Create(ctx, planted), "may not create or delete volumes")
	refused("change a reclaim policy as admin", rebind(pv, ns, "backups", tenant.UID, "",
		map[string]any{"persistentVolumeReclaimPolicy": "Delete"}), notVolume)
	refused("delete a tenant's claim as admin", op.Delete(ctx, loose.DeepCopy()), onlyOwnClaims)

	// Releasing the claim is allowed, and others are not held by the
	// policies.
	if err := claimMeta(tk, func(c *corev1.PersistentVolumeClaim) { controllerutil.RemoveFinalizer(c, artifactDeleteFinalizer) }); err != nil {
		t.Fatalf("releasing the claim: %v", err)
	}
	live := &corev1.PersistentVolume{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pv), live); err != nil {
		t.Fatal(err)
	}
	base := live.DeepCopy()
	live.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if err := env.Client.Patch(ctx, live, client.MergeFrom(base)); err != nil {
		t.Errorf("the policy refused someone other than the backup operator: %v", err)
	}
}

// TestBackupVolumeWritesPolicyMatchesTheServiceAccount: both policies name
// the backup operator's ServiceAccount as the platform installs it, and
// the namespace of its claims is that ServiceAccount's.
func TestBackupVolumeWritesPolicyMatchesTheServiceAccount(t *testing.T) {
	for _, dir := range []string{"platform", "deploy/backup"} {
		objs := build(t, dir)
		var sa *unstructured.Unstructured
		for _, o := range ofKind(objs, "ServiceAccount") {
			if strings.HasPrefix(o.GetName(), "cairn-backup-") {
				sa = o
			}
		}
		if sa == nil {
			t.Fatalf("%s: no backup ServiceAccount", dir)
		}
		want := fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", sa.GetNamespace(), sa.GetName())
		for _, policy := range []string{"cairn-backup-claim-writes", "cairn-backup-volume-writes"} {
			vap := find(t, objs, "ValidatingAdmissionPolicy", policy)
			find(t, objs, "ValidatingAdmissionPolicyBinding", policy)
			conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
			if len(conds) != 1 || strings.TrimSpace(conds[0].(map[string]any)["expression"].(string)) != want {
				t.Errorf("%s: %s's matchConditions are %v, want exactly %s", dir, policy, conds, want)
			}
			vars, _, _ := unstructured.NestedSlice(vap.Object, "spec", "variables")
			text := fmt.Sprint(vars)
			if !strings.Contains(text, "'"+sa.GetNamespace()+"/cairn-backup-delete-") && !strings.Contains(text, "request.namespace == '"+sa.GetNamespace()+"'") {
				t.Errorf("%s: %s does not name the operator's namespace %s for its claims: %s", dir, policy, sa.GetNamespace(), text)
			}
		}
	}
}
