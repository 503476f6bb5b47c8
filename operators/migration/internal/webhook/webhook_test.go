package webhook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/testing/testenv"
)

func mj() *migrationv1.MigrationJob {
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Spec: migrationv1.MigrationJobSpec{
			Source: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "a", Database: "d", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "a"}},
			Target: migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "b", Database: "d",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "b"}}},
		},
	}
}

func TestDefaulter(t *testing.T) {
	testenv.CheckDefaulter(t, NewDefaulter(nil), mj, func(m *migrationv1.MigrationJob) bool {
		return m.Spec.Source.Port == 5432 && m.Spec.Target.Port == 5432 && m.Spec.Mode == migrationv1.ModeFull &&
			m.Spec.Verify == migrationv1.VerifyChecksum && m.Spec.Cutover.Mode == migrationv1.CutoverManual
	})
}

func TestValidator(t *testing.T) {
	v := &Validator{}
	if _, err := v.ValidateCreate(context.Background(), mj()); err != nil {
		t.Errorf("valid refused: %v", err)
	}
	same := mj()
	same.Spec.Target.Host = "A"
	if _, err := v.ValidateCreate(context.Background(), same); err == nil || !strings.Contains(err.Error(), "is the source database") {
		t.Errorf("same database: %v", err)
	}
	// Every spelling of the source's address, seen from the namespace.
	for _, host := range []string{"a.shop", "a.shop.svc", "a.shop.svc.cluster.local"} {
		same := mj()
		same.Namespace = "shop"
		same.Spec.Target.Host = host
		if _, err := v.ValidateCreate(context.Background(), same); err == nil || !strings.Contains(err.Error(), "is the source database") {
			t.Errorf("same database as %s: %v", host, err)
		}
	}
	elsewhere := mj()
	elsewhere.Namespace = "shop"
	elsewhere.Spec.Target.Host = "a.staging"
	if _, err := v.ValidateCreate(context.Background(), elsewhere); err != nil {
		t.Errorf("the same Service name in another namespace refused: %v", err)
	}
	old, approved := mj(), mj()
	approved.Spec.Cutover.Approved = true
	if _, err := v.ValidateUpdate(context.Background(), old, approved); err != nil {
		t.Errorf("approval refused: %v", err)
	}
	stopped := mj()
	stopped.Spec.Cutover.WritersStopped = true
	if _, err := v.ValidateUpdate(context.Background(), old, stopped); err != nil {
		t.Errorf("writersStopped refused: %v", err)
	}
	// A Full cutover that switches a Secret with nothing stopping the
	// writes: warned (cutover will wait for writersStopped).
	switching := mj()
	switching.Spec.Cutover.SwitchSecret = &cairnv1.LocalObjectReference{Name: "app-db"}
	if w, err := v.ValidateCreate(context.Background(), switching); err != nil || !strings.Contains(strings.Join(w, "\n"), "writersStopped") {
		t.Errorf("switching cutover without stopping writes: warnings %q, %v", w, err)
	}
	switching.Spec.Cutover.SourceReadOnly = true
	if w, _ := v.ValidateCreate(context.Background(), switching); strings.Contains(strings.Join(w, "\n"), "writersStopped") {
		t.Errorf("read-only cutover warned: %q", w)
	}
	moved := mj()
	moved.Spec.Target.Host = "c"
	if _, err := v.ValidateUpdate(context.Background(), old, moved); err == nil || !strings.Contains(err.Error(), "spec.target") {
		t.Errorf("target change: %v", err)
	}
}
