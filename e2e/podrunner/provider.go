package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// maxMessageBytes is the kubelet's limit of a termination message.
const maxMessageBytes = 4096

// provider is the virtual-kubelet provider: it runs each pod bound to the
// node through a runtime and writes its status back (virtual-kubelet's pod
// controller resolves env from Secrets and ConfigMaps before CreatePod, and
// sends what notify receives to the API server).
type provider struct {
	node   string
	rt     runtime
	dir    string
	image  func(string) string
	logf   func(string, ...any)
	hostIP string
	// podGateway is the host's address from a pod's own network (set once
	// a pod needs it), apiPort the API server's port: the in-cluster
	// configuration of pods that serve (podnet.go).
	podGateway, apiPort string
	// cs reads the configMaps and Secrets of volumes.
	cs kubernetes.Interface

	mu     sync.Mutex
	pods   map[string]*podState
	notify func(*corev1.Pod)
}

type podState struct {
	pod      *corev1.Pod // status is ours
	dir      string
	running  map[string]instance
	deleted  bool
	finished bool
	logs     map[string]string
}

func key(ns, name string) string { return ns + "/" + name }

// NotifyPods registers virtual-kubelet's status callback.
func (p *provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

// publish hands a copy of the pod (with its status) to virtual-kubelet. The
// caller holds p.mu.
func (p *provider) publish(st *podState) {
	if p.notify != nil {
		p.notify(st.pod.DeepCopy())
	}
}

func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(pod.Namespace, pod.Name)
	if _, ok := p.pods[k]; ok {
		return nil
	}
	st := &podState{pod: pod.DeepCopy(), running: map[string]instance{}, logs: map[string]string{},
		dir: filepath.Join(p.dir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))}
	now := metav1.Now()
	initialized, waiting := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now}, "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		initialized.Status, initialized.Reason, waiting = corev1.ConditionFalse, "ContainersNotInitialized", "PodInitializing"
	}
	st.pod.Status = corev1.PodStatus{
		Phase:     corev1.PodPending,
		HostIP:    p.hostIP,
		HostIPs:   []corev1.HostIP{{IP: p.hostIP}},
		PodIP:     p.hostIP,
		PodIPs:    []corev1.PodIP{{IP: p.hostIP}},
		StartTime: &now,
		QOSClass:  pod.Status.QOSClass,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			initialized,
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
		},
	}
	for _, c := range pod.Spec.InitContainers {
		st.pod.Status.InitContainerStatuses = append(st.pod.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
		})
	}
	for _, c := range pod.Spec.Containers {
		st.pod.Status.ContainerStatuses = append(st.pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		})
	}
	p.pods[k] = st
	p.publish(st)
	go p.run(st)
	return nil
}

// isDeleted reports whether the pod was deleted.
func (p *provider) isDeleted(st *podState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return st.deleted
}

// pause waits d, or less if the pod is deleted meanwhile; it reports whether
// the pod is still there.
func (p *provider) pause(st *podState, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.isDeleted(st) {
			return false
		}
		time.Sleep(min(200*time.Millisecond, time.Until(deadline)))
	}
	return !p.isDeleted(st)
}

// start starts one container and registers it as running (stopping it at
// once if the pod was deleted meanwhile: DeletePod saw nothing to stop).
func (p *provider) start(ctx context.Context, st *podState, c preparedContainer) (instance, error) {
	if err := os.WriteFile(c.spec.TermLogHost, nil, 0o666); err != nil { // a new file for each run
		return nil, err
	}
	inst, err := p.rt.Start(ctx, c.spec)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	st.running[c.name] = inst
	if st.deleted {
		go inst.Stop(gracePeriod(st.pod))
	}
	p.mu.Unlock()
	return inst, nil
}

// initBackoff is the wait before an init container that failed runs again
// (restartPolicy OnFailure or Always): doubled each time up to
// maxInitBackoff (the kubelet starts at 10 s and stops at 5 min).
const (
	initBackoff    = time.Second
	maxInitBackoff = 30 * time.Second
)

// run prepares the pod's volumes (waiting, as the kubelet does, for a
// configMap or Secret that is not there yet), runs its init containers one
// after the other — one that fails ends the pod with restartPolicy Never and
// runs again after a backoff otherwise — then starts its containers, waits
// for them and records how they ended.
func (p *provider) run(st *podState) {
	ctx := context.Background()
	var pp *preparedPod
	for {
		var err error
		if pp, err = p.prepare(ctx, st); err == nil {
			break
		}
		var pending *errVolumeSource
		if !errors.As(err, &pending) {
			p.fail(st, "CreateContainerConfigError", err.Error())
			return
		}
		p.mu.Lock()
		changed := false
		for i := range st.pod.Status.ContainerStatuses {
			if w := st.pod.Status.ContainerStatuses[i].State.Waiting; w != nil && w.Message != pending.msg {
				w.Message, changed = pending.msg, true
			}
		}
		if changed {
			p.logf("pod runner: pod %s/%s waits: %s", st.pod.Namespace, st.pod.Name, pending.msg)
			p.publish(st)
		}
		p.mu.Unlock()
		if !p.pause(st, time.Second) {
			p.finish(st, nil)
			return
		}
	}
	if len(pp.synced) > 0 {
		go p.syncVolumes(st, pp.synced)
	}
	all := append(append([]preparedContainer{}, pp.inits...), pp.containers...)
	for i, ic := range pp.inits {
		if !p.runInit(ctx, st, i, ic, all) {
			return
		}
	}
	if len(pp.inits) > 0 {
		p.mu.Lock()
		setCondition(st.pod, corev1.PodInitialized, corev1.ConditionTrue, "", metav1.Now())
		p.publish(st)
		p.mu.Unlock()
	}
	if p.isDeleted(st) {
		p.finish(st, nil)
		return
	}
	// Start without the lock: creating a container can take a while, and
	// the other pods' status must not wait for it.
	started := map[string]instance{}
	for _, cs := range pp.containers {
		inst, err := p.start(ctx, st, cs)
		if err != nil {
			for _, i := range started {
				i.Stop(0)
				i.Wait()
			}
			p.fail(st, "StartError", fmt.Sprintf("container %s: %v", cs.name, err))
			return
		}
		started[cs.name] = inst
	}
	p.running(st, started, all)

	exits := map[string]exitStatus{}
	for name, inst := range started {
		exits[name] = inst.Wait()
	}
	p.finish(st, func(name string) (exitStatus, string, bool) {
		e, ok := exits[name]
		if !ok {
			return exitStatus{}, "", false
		}
		logs := started[name].Logs()
		return e, termMessage(all, name, e, logs), true
	})
}

// runInit runs init container i until it succeeded (true), or until it
// failed under restartPolicy Never, could not start or the pod was deleted:
// then the pod is finished (false).
func (p *provider) runInit(ctx context.Context, st *podState, i int, ic preparedContainer, all []preparedContainer) bool {
	backoff := initBackoff
	for {
		if p.isDeleted(st) {
			p.finish(st, nil)
			return false
		}
		inst, err := p.start(ctx, st, ic)
		if err != nil {
			p.fail(st, "StartError", fmt.Sprintf("init container %s: %v", ic.name, err))
			return false
		}
		p.mu.Lock()
		s := &st.pod.Status.InitContainerStatuses[i]
		s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		s.Started, s.ImageID, s.ContainerID = ptrTo(true), ic.spec.Image, "cairn-pod-runner://"+ic.spec.Name
		p.publish(st)
		p.mu.Unlock()

		e := inst.Wait()
		logs := inst.Logs()
		term := &corev1.ContainerStateTerminated{ExitCode: e.Code, Reason: e.Reason, Message: termMessage(all, ic.name, e, logs),
			StartedAt: metav1.NewTime(e.Started), FinishedAt: metav1.NewTime(e.Finished), ContainerID: s.ContainerID}
		if e.Err != nil {
			term.Reason, term.Message = "ContainerStatusUnknown", e.Err.Error()
			if term.ExitCode == 0 {
				term.ExitCode = 137
			}
		}
		p.mu.Lock()
		delete(st.running, ic.name)
		st.logs[ic.name] = logs
		s = &st.pod.Status.InitContainerStatuses[i]
		s.State, s.Started = corev1.ContainerState{Terminated: term}, ptrTo(false)
		s.Ready = term.ExitCode == 0
		if term.ExitCode == 0 {
			p.publish(st)
			p.mu.Unlock()
			return true
		}
		if st.deleted || st.pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			// The pod fails; its containers never started (they stay
			// waiting in PodInitializing, as with the kubelet).
			st.running = map[string]instance{}
			st.finished = true
			st.pod.Status.Phase = corev1.PodFailed
			now := metav1.Now()
			setCondition(st.pod, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", now)
			setCondition(st.pod, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", now)
			p.logf("pod runner: pod %s/%s: init container %s exited %d: the pod failed", st.pod.Namespace, st.pod.Name, ic.name, term.ExitCode)
			p.publish(st)
			if st.deleted {
				p.removeWhenReported(st.pod, gracePeriod(st.pod))
				p.forget(st)
			}
			p.mu.Unlock()
			return false
		}
		// OnFailure and Always: run it again after a backoff.
		s.RestartCount++
		s.LastTerminationState = corev1.ContainerState{Terminated: term}
		s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %s restarting failed container %s", backoff, ic.name)}}
		p.publish(st)
		p.mu.Unlock()
		if !p.pause(st, backoff) {
			p.finish(st, nil)
			return false
		}
		backoff = min(2*backoff, maxInitBackoff)
	}
}

// finish writes every container's terminated state and the pod's phase.
func (p *provider) finish(st *podState, exit func(string) (exitStatus, string, bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := metav1.Now()
	failed := false
	for i := range st.pod.Status.ContainerStatuses {
		s := &st.pod.Status.ContainerStatuses[i]
		term := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "the pod was deleted before its container started", StartedAt: now, FinishedAt: now}
		if exit != nil {
			if e, msg, ok := exit(s.Name); ok {
				term = &corev1.ContainerStateTerminated{ExitCode: e.Code, Reason: e.Reason, Message: msg,
					StartedAt: metav1.NewTime(e.Started), FinishedAt: metav1.NewTime(e.Finished)}
				if e.Err != nil {
					term.Reason, term.Message = "ContainerStatusUnknown", e.Err.Error()
					if term.ExitCode == 0 {
						term.ExitCode = 137
					}
				}
				if r, ok := st.running[s.Name]; ok {
					st.logs[s.Name] = r.Logs()
				}
			}
		}
		if term.ExitCode != 0 {
			failed = true
		}
		if r := s.State.Running; r != nil && term.StartedAt.IsZero() {
			term.StartedAt = r.StartedAt
		}
		s.State, s.Ready, s.Started = corev1.ContainerState{Terminated: term}, false, ptrTo(false)
	}
	st.running = map[string]instance{}
	st.finished = true
	st.pod.Status.Phase = corev1.PodSucceeded
	if failed {
		st.pod.Status.Phase = corev1.PodFailed
	}
	setCondition(st.pod, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", now)
	setCondition(st.pod, corev1.PodReady, corev1.ConditionFalse, "PodCompleted", now)
	p.publish(st)
	if st.deleted {
		p.removeWhenReported(st.pod, gracePeriod(st.pod))
		p.forget(st)
	}
}

// fail ends a pod whose containers could not start.
func (p *provider) fail(st *podState, reason, msg string) {
	p.logf("pod runner: pod %s/%s: %s: %s", st.pod.Namespace, st.pod.Name, reason, msg)
	p.finish(st, func(string) (exitStatus, string, bool) {
		now := time.Now()
		return exitStatus{Code: 128, Reason: reason, Started: now, Finished: now}, msg, true
	})
	p.mu.Lock()
	st.pod.Status.Message, st.pod.Status.Reason = msg, reason
	p.publish(st)
	p.mu.Unlock()
}

// forget drops a deleted pod and its host folders (not its claims' folders).
// The caller holds p.mu.
func (p *provider) forget(st *podState) {
	k := key(st.pod.Namespace, st.pod.Name)
	if cur, ok := p.pods[k]; ok && cur == st {
		delete(p.pods, k)
	}
	_ = os.RemoveAll(st.dir)
}

func (p *provider) UpdatePod(context.Context, *corev1.Pod) error { return nil }

// DeletePod stops the pod's containers with its grace period (SIGTERM, then
// SIGKILL) and reports them terminated.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	st, ok := p.pods[key(pod.Namespace, pod.Name)]
	if !ok || st.pod.UID != pod.UID {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s/%s is not known to the pod runner", pod.Namespace, pod.Name)
	}
	if st.deleted {
		p.mu.Unlock()
		return nil
	}
	st.deleted = true
	now := metav1.Now()
	st.pod.DeletionTimestamp = &now
	st.pod.DeletionGracePeriodSeconds = pod.DeletionGracePeriodSeconds
	if st.finished {
		p.publish(st)
		p.forget(st)
		p.mu.Unlock()
		return nil
	}
	grace := gracePeriod(pod)
	running := make([]instance, 0, len(st.running))
	for _, i := range st.running {
		running = append(running, i)
	}
	p.mu.Unlock()
	// run's Wait sees the containers end and finishes the pod.
	for _, i := range running {
		go i.Stop(grace)
	}
	return nil
}
