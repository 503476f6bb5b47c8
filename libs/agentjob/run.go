package agentjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

// ResultGrace is how long after its Job finished a run waits for the
// agent's result to reach the operator (the Job controller's update can
// arrive before the kubelet's pod update). A run that succeeded without a
// result after it is recorded without one.
const ResultGrace = 30 * time.Second

// JobNameLabel is the label the Job controller puts on a Job's pods.
const JobNameLabel = batchv1.JobNameLabel

// Run is one agent Job an object runs, every operator's one way to run the
// agent (as Cluster API's reconcileExternal is for every external child):
// the Job's name is recorded in the object's status before the Job is
// created, the Job is created, read past the cache right after, adopted on
// AlreadyExists only when it is the object's own, its outcome read, and the
// agent's result waited for (one ResultGrace) and parsed; a Job deleted
// before it finished is reported as such. R is the result type
// (contract.Result, contract.MigrationResult, contract.Catalog).
type Run[R any] struct {
	// Record returns the run's record in the object's status (called
	// again after a checkpoint: a status write decodes the stored object
	// anew, and a record inside a slice moves); its JobName names the Job.
	// Nil for a run that is not recorded (found by its name alone, e.g. one
	// derived from a request id).
	Record func() *cairnv1.AgentRun
	// Namespace and Name of the Job (Name defaults to Record.JobName).
	Namespace, Name string
	// Client creates the Job and reads it (through the cache for this
	// cluster); Live reads past any cache (the API reader; for another
	// cluster, its uncached client).
	Client client.Client
	Live   client.Reader
	// Checkpoint stores the object's status (the record with the Job's
	// name) before the Job is created; nil when Record is nil.
	Checkpoint func(context.Context) error
	// Render returns the Job to create (called only when it is created).
	Render func() (*batchv1.Job, error)
	// Ours reports whether an existing Job of that name belongs to the
	// object (its controller reference; a label for a Job in another
	// cluster). A Job that is not is never adopted: Stalled NotControlled.
	Ours func(*batchv1.Job) bool
	// NotOurs adds to the NotControlled message (e.g. which label is missing).
	NotOurs string
	// Parse decodes the agent's termination message.
	Parse func(string) (*R, error)
	// Grace overrides ResultGrace (tests).
	Grace time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// RunState is where a run is.
type RunState int

const (
	// RunPending: the Job is not there yet (created a moment ago and not
	// cached, or waiting to be read again); look again at RequeueAfter.
	RunPending RunState = iota
	// RunRunning: the Job exists and has not finished.
	RunRunning
	// RunSucceeded: the Job completed; Result is the agent's (nil when
	// none came within the grace).
	RunSucceeded
	// RunFailed: the Job failed; Failure is the agent's reason, if any.
	RunFailed
	// RunDeleted: the Job was created and is gone before it finished.
	RunDeleted
)

// Observation is what one look at a run found.
type Observation[R any] struct {
	State RunState
	// Job as read (nil when Pending or Deleted).
	Job *batchv1.Job
	// Created: this look created the Job.
	Created bool
	// Outcome of a finished Job.
	Outcome Outcome
	// Result of a succeeded run; Failure of a failed one (nil when the
	// agent reported none).
	Result  *R
	Failure *contract.FailedError
	// RequeueAfter: when to look again (0: the Job's own events will).
	RequeueAfter time.Duration
}

// FailureReason is the agent's reason of a failed run, or "".
func (o Observation[R]) FailureReason() string {
	if o.Failure == nil {
		return ""
	}
	return o.Failure.Reason
}

// FailureCode is the agent's failure code of a failed run (contract.Code…), or "".
func (o Observation[R]) FailureCode() string {
	if o.Failure == nil {
		return ""
	}
	return o.Failure.Code
}

func (r *Run[R]) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Run[R]) name() string {
	if r.Name == "" && r.Record != nil {
		return r.Record().JobName
	}
	return r.Name
}

func (r *Run[R]) created() bool { return r.Record != nil && r.Record().Created() }

// Observe ensures the run's Job exists and reads where it is. It records
// the start time when it creates the Job (or first sees it) and the
// completion time when the Job finished. An error ends the pass: a
// Stalled one (NotControlled) or a failure to read or create.
func (r *Run[R]) Observe(ctx context.Context) (Observation[R], error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: r.name()}
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, key, job)
	switch {
	case apierrors.IsNotFound(err) && r.created():
		// The cache may lag behind the Job created a moment ago: only the
		// API server can say it is gone.
		switch err := r.Live.Get(ctx, key, job); {
		case apierrors.IsNotFound(err):
			return Observation[R]{State: RunDeleted}, nil
		case err != nil:
			return Observation[R]{}, fmt.Errorf("reading Job %s: %w", key, err)
		}
		return Observation[R]{State: RunPending, RequeueAfter: time.Second}, nil
	case apierrors.IsNotFound(err):
		return r.create(ctx, key)
	case err != nil:
		return Observation[R]{}, fmt.Errorf("reading Job %s: %w", key, err)
	}
	return r.observe(ctx, job)
}

// create records the run and creates its Job; on AlreadyExists it reads the
// Job past the cache and goes on with it if it is ours.
func (r *Run[R]) create(ctx context.Context, key client.ObjectKey) (Observation[R], error) {
	if r.Checkpoint != nil {
		// The name is stored before the Job exists: a restarted operator
		// finds this Job, never a second one.
		if err := r.Checkpoint(ctx); err != nil {
			return Observation[R]{}, fmt.Errorf("recording Job %s: %w", key.Name, err)
		}
	}
	desired, err := r.Render()
	if err != nil {
		return Observation[R]{}, err
	}
	err = r.Client.Create(ctx, desired)
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("agent Job created", "Job", key.Name, "namespace", key.Namespace)
		if r.Record != nil {
			r.Record().StartTime = metaNow(r.now())
		}
		return Observation[R]{State: RunRunning, Job: desired, Created: true}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return Observation[R]{}, fmt.Errorf("creating Job %s: %w", key, err)
	}
	// A Job of this name exists that the cache did not show: created by an
	// earlier pass whose status write was lost, or someone else's. Read it
	// past the cache; it is checked before anything is read from it.
	job := &batchv1.Job{}
	if err := r.Live.Get(ctx, key, job); apierrors.IsNotFound(err) {
		return Observation[R]{State: RunPending, RequeueAfter: time.Second}, nil // deleted meanwhile
	} else if err != nil {
		return Observation[R]{}, fmt.Errorf("reading Job %s: %w", key, err)
	}
	return r.observe(ctx, job)
}

// observe reads an existing Job: whose it is, its outcome, its result.
func (r *Run[R]) observe(ctx context.Context, job *batchv1.Job) (Observation[R], error) {
	if !r.Ours(job) {
		nc := &ownership.NotControlledError{Kind: "Job", Key: client.ObjectKeyFromObject(job)}
		return Observation[R]{}, reconcile.Stalled(cairnv1.NotControlledReason, "%s%s", nc.Error(), r.NotOurs)
	}
	if r.Record != nil && r.Record().StartTime == nil {
		t := job.CreationTimestamp
		if t.IsZero() {
			t = *metaNow(r.now())
		}
		r.Record().StartTime = &t
	}
	obs, err := Read(ctx, r.Client, job, r.Parse, r.Grace, r.now())
	if err != nil {
		return Observation[R]{}, err
	}
	if r.Record != nil && (obs.State == RunSucceeded || obs.State == RunFailed) {
		at := obs.Outcome.At
		if at.IsZero() {
			at = r.now()
		}
		r.Record().CompletionTime = metaNow(at)
	}
	return obs, nil
}

// Read reads where an existing Job of the caller's is: running, or
// finished with the agent's result (read with c, the pods' reader) — a
// succeeded Job whose result has not reached c yet is Pending for up to
// grace (ResultGrace when 0) after it finished, and then Succeeded without
// a result.
func Read[R any](ctx context.Context, c client.Reader, job *batchv1.Job, parse func(string) (*R, error), grace time.Duration, now time.Time) (Observation[R], error) {
	obs := Observation[R]{State: RunRunning, Job: job, Outcome: JobOutcome(job)}
	if !obs.Outcome.Finished {
		return obs, nil
	}
	res, failure, err := Result(ctx, c, job, parse)
	if err != nil {
		return Observation[R]{}, err
	}
	obs.Result, obs.Failure = res, failure
	if !obs.Outcome.Succeeded {
		obs.State = RunFailed
		return obs, nil
	}
	if grace == 0 {
		grace = ResultGrace
	}
	if res == nil {
		if since := now.Sub(obs.Outcome.At); since < grace {
			// The Job's pods reach the cache on their own watch; a Pod
			// event wakes the object sooner.
			ctrl.LoggerFrom(ctx).V(1).Info("Job complete; waiting for the agent's report", "Job", job.Name)
			obs.State, obs.RequeueAfter = RunPending, min(grace-since, 2*time.Second)
			return obs, nil
		}
		ctrl.LoggerFrom(ctx).Info("Job complete but no agent report found", "Job", job.Name)
	}
	obs.State = RunSucceeded
	return obs, nil
}

// Result reads the agent's report of a finished Job from the termination
// messages of its pods (those it controls): the newest result parse
// accepts, else the newest failure the agent reported. Both nil when no pod
// has reported yet.
func Result[R any](ctx context.Context, c client.Reader, job *batchv1.Job, parse func(string) (*R, error)) (*R, *contract.FailedError, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{JobNameLabel: job.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	var own []corev1.Pod
	for i := range pods.Items {
		if job.UID == "" || metav1.IsControlledBy(&pods.Items[i], job) {
			own = append(own, pods.Items[i])
		}
	}
	res, failed, err := NewestResult(own, parse)
	if err != nil {
		return nil, nil, nil // no report yet
	}
	var fe *contract.FailedError
	if failed != nil && !errors.As(failed, &fe) {
		fe = &contract.FailedError{Reason: failed.Error()}
	}
	return res, fe, nil
}

func metaNow(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
