package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"cairn.dev/e2e/install"
)

// diagnose describes the operators' pods when the soak cannot go on (the
// platform stopped answering): each pod's phase and its manager
// container's state, which of them the soak killed itself, and the last
// lines of every manager that ended by itself — what a reader needs to see
// why no replica was left.
func diagnose(ctx context.Context, env *install.Env, killed map[string]bool) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Cluster.Config)
	if err != nil {
		return "diagnose: " + err.Error()
	}
	pods, err := cs.CoreV1().Pods(install.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "diagnose: listing the operators' pods: " + err.Error()
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "operators' pods at %s (%d):\n", clock(time.Now()), len(pods.Items))
	for _, p := range pods.Items {
		state, ended := managerState(&p)
		how := ""
		if killed[p.Name] {
			how = " (killed by the soak)"
		}
		fmt.Fprintf(&b, "  %s created %s: %s%s; manager %s%s\n", p.Name, clock(p.CreationTimestamp.Time), p.Status.Phase,
			reasonOf(&p), state, how)
		if ended && !killed[p.Name] {
			tail := int64(15)
			logs, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "manager", TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&b, "    (logs: %v)\n", err)
				continue
			}
			for _, l := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
				fmt.Fprintf(&b, "    | %s\n", l)
			}
		}
	}
	return b.String()
}

func reasonOf(p *corev1.Pod) string {
	if p.Status.Reason == "" && p.Status.Message == "" {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", p.Status.Reason, p.Status.Message)
}

// managerState says how the manager container is, and whether it ended.
func managerState(p *corev1.Pod) (string, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != "manager" {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return fmt.Sprintf("running since %s, ready %v", clock(cs.State.Running.StartedAt.Time), cs.Ready), false
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			return fmt.Sprintf("ended at %s: %s, exit code %d %s", clock(t.FinishedAt.Time), t.Reason, t.ExitCode, t.Message), true
		case cs.State.Waiting != nil:
			return fmt.Sprintf("waiting: %s %s", cs.State.Waiting.Reason, cs.State.Waiting.Message), false
		}
	}
	return "not started", false
}
