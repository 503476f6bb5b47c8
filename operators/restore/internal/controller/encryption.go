package controller

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
)

// podResult finds the agent's result in a restore Job's pods: the newest
// successful result, else the newest failure with its code.
func podResult(pods []corev1.Pod) (*contract.Result, *contract.FailedError, error) {
	r, failure, err := agentjob.NewestResult(pods, contract.Parse)
	var failed *contract.FailedError
	if failure != nil && !errors.As(failure, &failed) {
		failed = &contract.FailedError{Reason: failure.Error()}
	}
	return r, failed, err
}

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
		}
	}
	return cairnv1.FailedReason
}
