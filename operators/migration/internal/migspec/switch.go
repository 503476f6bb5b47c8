package migspec

import (
	"fmt"

	migrationv1 "cairn.dev/apis/migration/v1"
)

// NotSwitchable is the message refusing Secret ns/name as
// spec.cutover.switchSecret: it lacks the opt-in label.
func NotSwitchable(ns, name string) string {
	return fmt.Sprintf("spec.cutover.switchSecret: Secret %q in namespace %q has no label %s=%q: the operator switches only Secrets whose owner opted in "+
		"(kubectl label secret -n %s %s %s=%s); only its keys %v are written",
		name, ns, migrationv1.SwitchableLabel, migrationv1.SwitchableValue, ns, name, migrationv1.SwitchableLabel, migrationv1.SwitchableValue, migrationv1.SwitchKeys)
}
