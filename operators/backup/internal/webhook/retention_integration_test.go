package webhook

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/testing/testenv"
)

// TestRetentionFormsAcrossTheUpgrade: retentionDays and retention
// (calendar tiers) are one or the other, refused together at admission —
// and a BackupJob stored by the previous CRD, which defaulted retentionDays
// to 7 beside retention, stays updatable after the upgrade while that value
// is unchanged (the CRD rule's optionalOldSelf and the webhook agree).
// Behind a real kube-apiserver, with the webhooks, and the previous CRD
// rule and default installed first.
func TestRetentionFormsAcrossTheUpgrade(t *testing.T) {
	h := startWebhooks(t)
	ctx := t.Context()
	withTiers := func(name string) *backupv1.BackupJob {
		bj := h.postgres(name)
		bj.Spec.Retention = &backupv1.RetentionPolicy{KeepDaily: 7, KeepMonthly: 12}
		return bj
	}
	const previousRule = "!has(self.retention) || !has(self.retentionDays) || self.retentionDays == 7"

	// The previous CRD: the rule that let the default 7 stand beside
	// retention, and the default itself; and no webhooks (this one refuses
	// both forms: the previous one did not look).
	hooks := testenv.TakeWebhooks(t, h.c)
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := h.c.Get(ctx, client.ObjectKey{Name: "backupjobs.backup.cairn.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	current := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	replaced := false
	for _, v := range versions {
		v := v.(map[string]any)
		if v["name"] != "v1" {
			continue
		}
		spec := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
		spec["properties"].(map[string]any)["retentionDays"].(map[string]any)["default"] = int64(7)
		for _, r := range spec["x-kubernetes-validations"].([]any) {
			r := r.(map[string]any)
			if strings.Contains(r["rule"].(string), "has(self.retentionDays)") {
				r["rule"] = previousRule
				delete(r, "optionalOldSelf")
				replaced = true
			}
		}
	}
	if !replaced {
		t.Fatal("the CRD has no retention rule to replace")
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "the previous CRD to default retentionDays beside retention", func() error {
		probe := withTiers("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Spec.RetentionDays != 7 {
			return fmt.Errorf("retentionDays %d", probe.Spec.RetentionDays)
		}
		return nil
	})
	legacy := withTiers("legacy")
	if err := h.c.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if legacy.Spec.RetentionDays != 7 {
		t.Fatalf("stored by the previous CRD with retentionDays %d, want the default 7", legacy.Spec.RetentionDays)
	}

	// The upgrade: this CRD and the webhooks again.
	for _, o := range hooks {
		if err := h.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	crd.Object["spec"] = current.Object["spec"]
	if err := h.c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	testenv.Poll(t, 30*time.Second, "this CRD to refuse both retention forms", func() error {
		both := withTiers("probe")
		both.Spec.RetentionDays = 7
		if err := h.c.Create(ctx, both, client.DryRunAll); err == nil {
			return fmt.Errorf("retentionDays 7 beside retention admitted")
		} else if !strings.Contains(err.Error(), "not both") {
			return err
		}
		probe := withTiers("probe")
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		if probe.Spec.RetentionDays != 0 || len(probe.Finalizers) == 0 {
			return fmt.Errorf("retentionDays %d (still defaulted?), finalizers %q (no webhook yet?)", probe.Spec.RetentionDays, probe.Finalizers)
		}
		return nil
	})

	// A new object: one or the other; neither is 7 days.
	for _, days := range []int32{7, 30} {
		both := withTiers(fmt.Sprintf("both-%d", days))
		both.Spec.RetentionDays = days
		if err := h.c.Create(ctx, both); err == nil || !strings.Contains(err.Error(), "set either retentionDays (the simple form) or retention (calendar tiers), not both") {
			t.Errorf("retentionDays %d beside retention: %v, want refused", days, err)
		}
	}
	plain := h.postgres("plain")
	if err := h.c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if plain.Spec.RetentionDays != 0 || plain.Spec.RetentionDaysOrDefault() != backupv1.DefaultRetentionDays {
		t.Errorf("neither form: retentionDays %d (kept %d days), want absent, 7 days", plain.Spec.RetentionDays, plain.Spec.RetentionDaysOrDefault())
	}

	// The stored object: updatable while its retentionDays is unchanged;
	// a new retentionDays beside retention is refused; dropping it is fine.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Spec.Schedule = "30 3 * * *"
	if err := h.c.Update(ctx, legacy); err != nil {
		t.Fatalf("a schedule change of the object stored with both forms: %v", err)
	}
	changed := legacy.DeepCopy()
	changed.Spec.RetentionDays = 30
	if err := h.c.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("retentionDays 7 → 30 beside retention: %v, want refused", err)
	}
	legacy.Spec.RetentionDays = 0
	if err := h.c.Update(ctx, legacy); err != nil {
		t.Fatalf("dropping retentionDays: %v", err)
	}
	if legacy.Spec.RetentionDays != 0 || legacy.Spec.Schedule != "30 3 * * *" {
		t.Errorf("stored: retentionDays %d schedule %q", legacy.Spec.RetentionDays, legacy.Spec.Schedule)
	}
}
