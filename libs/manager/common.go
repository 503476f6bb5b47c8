package manager

import (
	"flag"
	"time"

	"cairn.dev/libs/access"
)

// Common are the settings Cairn operators share, bound as flags by
// Operator.BindFlags when the Operator declares them (Operator.AgentImage,
// Operator.CleanupDeadline, Operator.Access); the controllers read them
// from Options in Setup.
type Common struct {
	// AgentImage is --agent-image: the Cairn agent the operator's Jobs run.
	AgentImage string
	// CleanupDeadline is --cleanup-deadline: how long a deleted object's
	// cleanup may take before its finalizer is removed anyway.
	CleanupDeadline time.Duration
	// Access are the approval key's and the requester review's flags
	// (libs/access); its Guard is registered before Operator.Prepare.
	Access access.Options
}

// BindFlags registers o's flags and, for what op declares, the common
// operator flags, then op's own: the one flag set Run and the tests' in-process
// operators (libs/testing/testenv) parse.
func (op Operator) BindFlags(fs *flag.FlagSet, o *Options) {
	o.BindFlags(fs)
	if op.AgentImage != "" {
		fs.StringVar(&o.AgentImage, "agent-image", op.AgentImage, "Image of the Cairn agent the operator's Jobs run.")
	}
	if op.CleanupDeadline > 0 {
		fs.DurationVar(&o.CleanupDeadline, "cleanup-deadline", op.CleanupDeadline,
			"How long after a deletion request the cleanup (the Jobs, the stored artifacts or the children) may take before the finalizer is removed anyway.")
	}
	if op.Access {
		o.Access.BindFlags(fs, op.Name, op.Trusted...)
	}
	if op.Flags != nil {
		op.Flags(fs)
	}
}

// OperatorNamespace is the namespace the operator runs in: the
// leader-election namespace when set, else the pod's ("" outside a pod).
func (o *Options) OperatorNamespace() string {
	if o.LeaderElectionNamespace != "" {
		return o.LeaderElectionNamespace
	}
	return access.PodNamespace()
}
