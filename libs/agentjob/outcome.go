package agentjob

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// ReasonPodFailurePolicy is the reason of the Failed condition of a Job that
// its PodFailurePolicy failed: the agent exited with contract.ExitUsage,
// contract.ExitCorrupted or contract.ExitUnsupported, and its remaining retries were not used.
const ReasonPodFailurePolicy = batchv1.JobReasonPodFailurePolicy

// Outcome of a Job.
type Outcome struct {
	// Finished is true once the Job is Complete or Failed.
	Finished bool
	// Succeeded is true when it is Complete.
	Succeeded bool
	// At is when it finished (the condition's transition time).
	At time.Time
	// Reason and Message of the Failed condition, as the Job controller set
	// them: BackoffLimitExceeded (every retry failed), DeadlineExceeded, or
	// PodFailurePolicy (ReasonPodFailurePolicy: the agent reported a failure
	// retrying cannot fix; Message names the container, pod and exit code).
	Reason, Message string
	// NotRetried is true when the Job failed by its PodFailurePolicy, before
	// using its retries (Reason is ReasonPodFailurePolicy).
	NotRetried bool
}

// JobOutcome reads a Job's terminal condition.
func JobOutcome(job *batchv1.Job) Outcome {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Outcome{Finished: true, Succeeded: true, At: c.LastTransitionTime.Time}
		case batchv1.JobFailed:
			return Outcome{Finished: true, At: c.LastTransitionTime.Time, Reason: c.Reason, Message: c.Message,
				NotRetried: c.Reason == ReasonPodFailurePolicy}
		}
	}
	return Outcome{}
}

// PodResult finds the agent's result in the termination messages of a Job's
// pods: the newest successful result, else the newest failure reason.
func PodResult(pods []corev1.Pod) (*contract.Result, string, error) {
	r, failure, err := NewestResult(pods, contract.Parse)
	if failure != nil {
		return r, failure.Error(), err
	}
	return r, "", err
}

// NewestResult scans the agent container's termination messages in pods with
// parse (contract.Parse, contract.ParseMigration, ...): it returns the newest
// message parse accepts, else the error of the newest one it rejected from a
// container that exited non-zero (retries run one pod after another).
func NewestResult[T any](pods []corev1.Pod, parse func(string) (*T, error)) (*T, error, error) {
	var newest *T
	var failure error
	var newestAt, failureAt time.Time
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			term := cs.State.Terminated
			if cs.Name != ContainerName || term == nil || term.Message == "" {
				continue
			}
			r, err := parse(term.Message)
			if err != nil {
				if term.ExitCode != 0 && (failure == nil || term.FinishedAt.After(failureAt)) {
					failure, failureAt = err, term.FinishedAt.Time
				}
				continue
			}
			if newest == nil || term.FinishedAt.After(newestAt) {
				newest, newestAt = r, term.FinishedAt.Time
			}
		}
	}
	if newest == nil && failure == nil {
		return nil, nil, fmt.Errorf("no agent result in %d pod(s)", len(pods))
	}
	return newest, failure, nil
}

// Artifact converts an agent result to the API's artifact reference.
func Artifact(r *contract.Result) *cairnv1.Artifact {
	if r == nil {
		return nil
	}
	return &cairnv1.Artifact{Path: r.Artifact, Size: r.Size, Checksum: r.Checksum, EncryptedTo: r.EncryptedTo}
}
