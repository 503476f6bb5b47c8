package webhook

import (
	"testing"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/testing/testenv"
)

func TestDefaulter(t *testing.T) {
	testenv.CheckDefaulter(t, NewDefaulter(nil), func() *platformv1.ProtectionPlan {
		return &platformv1.ProtectionPlan{Spec: platformv1.ProtectionPlanSpec{Database: cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine}}}
	}, func(p *platformv1.ProtectionPlan) bool {
		return p.Spec.TimeZone == "UTC" && p.Spec.Database.Port == 3306 && p.Spec.Verification.RestoreInto.Port == 3306
	})
}
