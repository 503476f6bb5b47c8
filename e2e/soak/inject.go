package soak

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/install"
	"cairn.dev/libs/agentjob"
)

// FaultResult is what one fault did.
type FaultResult struct {
	Fault
	// Started is when it was injected; Target what it hit.
	Started time.Time
	Target  string
	// Skipped says why nothing was hit (no agent pod ran in time, ...).
	Skipped string
	Err     error
}

func (r FaultResult) String() string {
	s := fmt.Sprintf("%s  %-24s", clock(r.Started), r.Kind)
	switch {
	case r.Err != nil:
		return s + " ERROR " + r.Err.Error()
	case r.Skipped != "":
		return s + " skipped: " + r.Skipped
	}
	return s + " " + r.Target
}

// injector carries out a fault plan on the soak's platform.
type injector struct {
	env       *install.Env
	gate      *Gate
	namespace string
	logf      func(string, ...any)
	// agentWait is how long an agent kill waits for a running agent.
	agentWait time.Duration

	cp     sync.Mutex // one control-plane restart at a time
	s3     sync.Mutex // one S3 outage at a time (a second one follows the first)
	mu     sync.Mutex
	killed map[string]bool // operator pods the soak killed
}

// run injects each fault at start+At, each in its own goroutine (an agent
// kill waiting for its pod does not hold up the next fault), and returns
// once every one has ended.
func (in *injector) run(ctx context.Context, start time.Time, plan []Fault) []FaultResult {
	out := make([]FaultResult, len(plan))
	var wg sync.WaitGroup
	for i, f := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				out[i] = FaultResult{Fault: f, Skipped: "the soak ended first"}
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			res := FaultResult{Fault: f, Started: time.Now()}
			res.Target, res.Skipped, res.Err = in.inject(ctx, f)
			in.logf("fault %s", res)
			out[i] = res
		}()
	}
	wg.Wait()
	return out
}

func (in *injector) inject(ctx context.Context, f Fault) (target, skipped string, err error) {
	switch f.Kind {
	case KillLeader, KillStandby:
		return in.killOperator(ctx, f.Operator, f.Kind == KillLeader)
	case KillAgentBackup:
		return in.killAgent(ctx, backupv1.BackupJobLabel)
	case KillAgentRestore:
		return in.killAgent(ctx, restorev1.RestoreJobLabel)
	case RestartAPIServer, RestartEtcd:
		comp := "kube-apiserver"
		if f.Kind == RestartEtcd {
			comp = "etcd"
		}
		in.cp.Lock()
		defer in.cp.Unlock()
		down, err := in.env.Cluster.RestartComponent(ctx, comp)
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("%s SIGKILLed and started again; the API server ready %s after the kill", comp, down.Round(100*time.Millisecond)), "", nil
	case S3Outage:
		in.s3.Lock()
		defer in.s3.Unlock()
		down := time.Now()
		in.gate.Down()
		select {
		case <-ctx.Done():
		case <-time.After(S3OutageLength):
		}
		if err := in.gate.Up(); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("S3 (%s) refused and cut every connection from %s for %s", in.gate.Endpoint(), clock(down), S3OutageLength), "", nil
	}
	return "", "", fmt.Errorf("unknown fault %q", f.Kind)
}

// killOperator SIGKILLs the manager container of operator's leader (or of
// its other running replica).
func (in *injector) killOperator(ctx context.Context, operator string, leader bool) (string, string, error) {
	pods, err := install.OperatorPods(ctx, in.env.Client, operator)
	if err != nil {
		return "", "", err
	}
	holder, err := install.LeaderPod(ctx, in.env.Client, operator)
	if err != nil {
		return "", "", err
	}
	var victim string
	for _, p := range pods {
		if (p.Name == holder) == leader && p.Status.PodIP != "" {
			victim = p.Name
			break
		}
	}
	if victim == "" {
		what := "no leader holds the Lease"
		if !leader {
			what = fmt.Sprintf("no running replica besides the leader %q", holder)
		}
		return "", what, nil
	}
	in.mu.Lock()
	in.killed[victim] = true
	in.mu.Unlock()
	if err := in.env.Cluster.Pods.Kill(install.Namespace, victim, "manager"); err != nil {
		return "", "", err
	}
	role := "standby"
	if leader {
		role = "leader"
	}
	return fmt.Sprintf("%s operator's %s %s (%d running replica(s) before)", operator, role, victim, len(pods)), "", nil
}

// killAgent waits for a running agent container of a pod labelled label
// (a backup's or a restore's) and SIGKILLs it.
func (in *injector) killAgent(ctx context.Context, label string) (string, string, error) {
	deadline := time.Now().Add(in.agentWait)
	for time.Now().Before(deadline) {
		pods := &corev1.PodList{}
		if err := in.env.Client.List(ctx, pods, client.InNamespace(in.namespace), client.HasLabels{label}); err == nil {
			sort.Slice(pods.Items, func(a, b int) bool { return pods.Items[a].Name < pods.Items[b].Name })
			for _, p := range pods.Items {
				if p.Labels[backupv1.RunKindLabel] == "list" || p.Labels[backupv1.RunKindLabel] == "delete" || !agentRunning(&p) {
					continue
				}
				err := in.env.Cluster.Pods.Kill(p.Namespace, p.Name, agentjob.ContainerName)
				if err == nil {
					return fmt.Sprintf("agent of pod %s (Job %s) while it ran", p.Name, p.Labels[jobNameLabel]), "", nil
				}
				// It ended between the list and the kill: look again.
			}
		}
		select {
		case <-ctx.Done():
			return "", "", errors.Join(ctx.Err(), errors.New("no running agent"))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "", fmt.Sprintf("no %s agent ran within %s", label, in.agentWait), nil
}

func agentRunning(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == agentjob.ContainerName && cs.State.Running != nil {
			return true
		}
	}
	return false
}
