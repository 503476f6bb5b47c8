package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
)

// TestValidatorScratchSpellings: a scratch database that is the protected
// one under another spelling of its address, seen from the plan's
// namespace, is refused; the same Service name of another namespace is not.
func TestValidatorScratchSpellings(t *testing.T) {
	plan := func(protected, scratch string) *platformv1.ProtectionPlan {
		n := int32(3)
		return &platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: platformv1.ProtectionPlanSpec{
				Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: protected, Database: "orders",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}},
				Backup: platformv1.BackupTemplate{Schedule: "0 2 * * *",
					Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}},
				Verification: platformv1.VerificationSpec{EveryNBackups: &n, RestoreInto: platformv1.ScratchDatabase{
					Host: scratch, Database: "orders", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}}},
				Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
			}}
	}
	for _, tc := range []struct {
		protected, scratch string
		refused            bool
	}{
		{"orders-db", "orders-db.shop", true},
		{"orders-db", "orders-db.shop.svc", true},
		{"orders-db.shop.svc.cluster.local", "orders-db", true},
		{"localhost", "127.0.0.1", true},
		{"orders-db", "orders-db.staging", false},
		{"orders-db", "scratch-db", false},
	} {
		_, err := (&Validator{}).ValidateCreate(context.Background(), plan(tc.protected, tc.scratch))
		if got := err != nil && strings.Contains(err.Error(), "is the protected database"); got != tc.refused {
			t.Errorf("protected %s, scratch %s: refused %v (%v), want %v", tc.protected, tc.scratch, got, err, tc.refused)
		}
	}
}
