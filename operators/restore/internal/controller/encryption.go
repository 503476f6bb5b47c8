package controller

import (
	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// failedReason is the Stalled reason of a failed restore: the agent's
// failure code when the operator knows it (an encrypted artifact restored
// without a matching identity: the target was not touched, and the
// message names the recipients the artifact needs), else Failed. Decided
// on the code, never on the message's words.
func failedReason(f *contract.FailedError) string {
	if f != nil {
		switch f.Code {
		case contract.CodeEncryptionIdentityMissing:
			return restorev1.RestoreJobEncryptionIdentityMissingReason
		case contract.CodeEncryptionIdentityMismatch:
			return restorev1.RestoreJobEncryptionIdentityMismatchReason
		case contract.CodeOutsideWindow:
			return restorev1.RestoreJobOutsideWindowReason
		case contract.CodeArchiveGap:
			return restorev1.RestoreJobArchiveGapReason
		}
	}
	return cairnv1.FailedReason
}
