package agentjob

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
)

// PointInTime is a run's point-in-time recovery settings (docs/pitr.md).
type PointInTime struct {
	// Base: a backup records where its snapshot stands in the change log
	// (contract.EnvPointInTime) and reports the archive's window.
	Base bool
	// MaxSegmentAge and MaxLag: the archiver's (contract.EnvMaxSegmentAge,
	// contract.EnvMaxLag); rendered when set.
	MaxSegmentAge, MaxLag time.Duration
	// MaxRetainedWALBytes (PostgreSQL): the archiver and the archive-status
	// check drop the archiver's slot when it retains more
	// (contract.EnvArchiveMaxRetainedWALBytes); rendered when set.
	MaxRetainedWALBytes int64
	// RecoveryTarget: a restore's target second (RFC 3339) or "latest"
	// (contract.EnvRecoveryTarget).
	RecoveryTarget string
}

func (p *PointInTime) env() []corev1.EnvVar {
	if p == nil {
		return nil
	}
	var env []corev1.EnvVar
	if p.Base {
		env = append(env, corev1.EnvVar{Name: contract.EnvPointInTime, Value: "true"})
	}
	if p.MaxSegmentAge > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvMaxSegmentAge, Value: p.MaxSegmentAge.String()})
	}
	if p.MaxLag > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvMaxLag, Value: p.MaxLag.String()})
	}
	if p.MaxRetainedWALBytes > 0 {
		env = append(env, corev1.EnvVar{Name: contract.EnvArchiveMaxRetainedWALBytes, Value: strconv.FormatInt(p.MaxRetainedWALBytes, 10)})
	}
	if p.RecoveryTarget != "" {
		env = append(env, corev1.EnvVar{Name: contract.EnvRecoveryTarget, Value: p.RecoveryTarget})
	}
	return env
}

// ArchiverDeployment renders the point-in-time archiver of a BackupJob
// (s.Command contract.CommandArchive, s.PointInTime its segment age and
// lag): the agent pod of every run — restricted, credentials from Secrets
// — run by a Deployment of one replica that is replaced with Recreate, so
// never two readers of one change log stream into one archive. The pod
// restarts on failure (a long-lived reader, not a run) and is ready while
// its health endpoint says the archive keeps up
// (contract.ArchiverReadyPath).
func ArchiverDeployment(s Spec) appsv1.DeploymentSpec {
	tpl := PodTemplate(s)
	tpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	c := &tpl.Spec.Containers[0]
	// The probe's port is not declared as a container port: nothing but
	// the kubelet reads it (no Service), and a pod declaring none runs on
	// the e2e pod runner in the host's network, where the databases are.
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: contract.ArchiverReadyPath, Port: intstr.FromInt32(contract.ArchiverHealthPort), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: 10, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3,
	}
	return appsv1.DeploymentSpec{
		Replicas:             ptr.To[int32](1),
		Selector:             &metav1.LabelSelector{MatchLabels: s.Labels},
		Template:             tpl,
		Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		RevisionHistoryLimit: ptr.To[int32](2),
	}
}
