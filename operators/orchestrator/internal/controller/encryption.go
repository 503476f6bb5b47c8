package controller

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
)

// setDecryption sets DecryptionVerified (plans whose backups are encrypted)
// from the newest finished verification: the agent decrypts the whole
// artifact with the plan's identity before it touches the scratch
// database, so a restore that got as far as restoring — succeeded, or
// failed only in its checks — proves the identity decrypts that backup,
// and a RestoreJob that failed with EncryptionIdentityMismatch or
// EncryptionIdentityMissing proves it does not. Nothing else checks that
// the key a restore will need still works: rotating the backups'
// recipients without updating the plan's identity shows here at the next
// verification, not during an outage.
func setDecryption(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec) {
	typ := platformv1.DecryptionVerifiedCondition
	if spec.Backup.Encryption == nil {
		conditions.Delete(plan, typ)
		return
	}
	identity := "the plan's identity"
	if e := spec.Verification.Encryption; e != nil {
		identity = fmt.Sprintf("the identity in Secret %s (key %s)", e.IdentitySecretRef.Name, e.IdentitySecretRef.Key)
	}
	lv := plan.Status.LastVerification
	switch {
	case lv == nil || !finished(lv.Result):
		if conditions.Get(plan, typ) == nil {
			conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.NoVerificationYetReason,
				"no verification has decrypted a backup yet")
		}
	case lv.Reason == restorev1.RestoreJobEncryptionIdentityMismatchReason || lv.Reason == restorev1.RestoreJobEncryptionIdentityMissingReason:
		conditions.Set(plan, typ, metav1.ConditionFalse, platformv1.IdentityCannotDecryptReason, fmt.Sprintf(
			"%s cannot decrypt backup %s (RestoreJob %s): %s; restores of this backup need an identity of its recipients",
			identity, lv.Artifact.Path, lv.RestoreJob, lv.Message))
	case lv.Result == platformv1.VerificationSucceeded || lv.Reason == restorev1.RestoreJobChecksFailedReason ||
		lv.Reason == restorev1.RestoreJobChecksNotReportedReason:
		if len(lv.Artifact.EncryptedTo) == 0 {
			conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.NoVerificationYetReason, fmt.Sprintf(
				"backup %s is not encrypted (taken before spec.backup.encryption, or by an agent without encryption); the next verification of an encrypted backup proves the identity",
				lv.Artifact.Path))
			return
		}
		conditions.Set(plan, typ, metav1.ConditionTrue, platformv1.IdentityDecryptsReason, fmt.Sprintf(
			"%s decrypted backup %s, encrypted to %s (RestoreJob %s)",
			identity, lv.Artifact.Path, strings.Join(lv.Artifact.EncryptedTo, ", "), lv.RestoreJob))
	default:
		// Failed before it decrypted anything (store, database, deadline):
		// the previous finding stands.
		if conditions.Get(plan, typ) == nil {
			conditions.Set(plan, typ, metav1.ConditionUnknown, platformv1.VerificationFailedReason,
				fmt.Sprintf("verification %s failed before decrypting: %s", lv.RestoreJob, lv.Message))
		}
	}
}
