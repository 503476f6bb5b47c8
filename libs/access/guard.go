package access

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Guard is what one operator's webhooks and controllers share: the
// Reviewer (validating webhook) and the Approver (defaulting webhook,
// validating webhook, controller).
type Guard struct {
	Reviewer *Reviewer
	Approver *Approver
}

// Default signs checks into obj's annotation; the defaulting webhook calls
// it last, after the defaults that may add references.
func (g *Guard) Default(obj metav1.Object, gk schema.GroupKind, checks []Check) {
	g.Approver.Approve(obj, gk, checks)
}

// Admit is the validating webhook's check of obj (of gk, served as gr)
// whose references are checks. On create (old nil) the request's user must
// be allowed every check; on update what the update adds to the old
// object's references (oldChecks) or redirects — a check whose uses
// (Check.Uses: hosts, endpoints, buckets, recipients, Object Lock, ...)
// changed is asked again, as on create — and every check of extra (what
// removing a protection needs, Weakening); unless the old object was never
// approved (created while the webhook was not installed, or before Cairn
// checked references or their uses), in which case every check. A
// label-only or schedule-only update asks nothing. Then the annotation must
// approve checks: a mismatch means a mutating webhook ran after Cairn's and
// changed a reference, or — for the kinds the defaulting webhook does not
// sign on update — that the update removed or changed the approval, which
// only the webhook writes.
func (g *Guard) Admit(ctx context.Context, gr schema.GroupResource, gk schema.GroupKind, obj, old metav1.Object, checks, oldChecks []Check, extra ...Check) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("access: no admission request in the context: %w", err))
	}
	todo := checks
	oldApproved := old != nil && g.Approver.Approved(old, gk, oldChecks)
	if oldApproved {
		todo = append(Changed(oldChecks, checks), extra...)
	} else if old != nil {
		todo = append(slices.Clone(checks), extra...)
	}
	if err := g.Reviewer.Review(ctx, req.UserInfo, gr, obj.GetName(), todo); err != nil {
		return err
	}
	if oldApproved && old.GetAnnotations()[Annotation] != obj.GetAnnotations()[Annotation] && !g.Approver.Approved(obj, gk, checks) {
		return apierrors.NewForbidden(gr, obj.GetName(), errors.New("metadata.annotations["+Annotation+
			"]: an update may not remove or change it: it is written by the operator's admission webhook only "+
			"(to have an object approved again, annotate it, e.g. kubectl annotate --overwrite ... cairn.dev/approve=1)"))
	}
	if !g.Approver.Approved(obj, gk, checks) {
		return apierrors.NewForbidden(gr, obj.GetName(), errors.New("metadata.annotations["+Annotation+
			"]: does not approve the object's references (it is written by the operator's defaulting webhook; "+
			"did another mutating webhook change a reference after it?)"))
	}
	return nil
}

// Options are an operator's flags for the Guard.
type Options struct {
	// KeyNamespace and KeySecret name the Secret holding the approval key;
	// an empty namespace means the leader-election namespace, else the
	// pod's own.
	KeyNamespace, KeySecret string
	// Trusted are user names whose requests are not reviewed (Reviewer.Trusted).
	Trusted []string
}

// OrchestratorServiceAccount is the orchestrator's user as deploy/ installs
// it: the default of --trusted-requesters for the operators whose kinds it
// creates.
const OrchestratorServiceAccount = "system:serviceaccount:cairn-system:cairn-orchestrator-controller-manager"

// Defaults sets o to operator name's defaults: its approval key Secret
// cairn-<name>-approval-key, and trusted.
func (o *Options) Defaults(name string, trusted ...string) {
	o.KeySecret, o.Trusted = "cairn-"+name+"-approval-key", trusted
}

// BindFlags registers o's flags for operator name; trusted is the default
// of --trusted-requesters.
func (o *Options) BindFlags(fs *flag.FlagSet, name string, trusted ...string) {
	o.Defaults(name, trusted...)
	fs.StringVar(&o.KeySecret, "approval-key-secret", o.KeySecret,
		"Secret (created when missing) holding the key the webhooks sign approved references with and the controllers verify.")
	fs.StringVar(&o.KeyNamespace, "approval-key-namespace", o.KeyNamespace,
		"Namespace of --approval-key-secret (default: the leader-election namespace, else the pod's).")
	fs.Func("trusted-requesters", "Comma-separated user names whose objects' references are not reviewed (default: "+
		strings.Join(trusted, ",")+"); they must check their own requesters.", func(v string) error {
		o.Trusted = nil
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				o.Trusted = append(o.Trusted, u)
			}
		}
		return nil
	})
}

// serviceAccountNamespaceFile is where a pod finds its namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// PodNamespace is the namespace of the pod this process runs in, "" outside
// a pod.
func PodNamespace() string {
	b, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// NewGuard loads (or creates) the approval key and returns the Guard for
// mgr. leaderElectionNamespace is the manager's option (may be empty).
func (o *Options) NewGuard(ctx context.Context, mgr ctrl.Manager, leaderElectionNamespace string) (*Guard, error) {
	ns := o.KeyNamespace
	if ns == "" {
		ns = leaderElectionNamespace
	}
	if ns == "" {
		if ns = PodNamespace(); ns == "" {
			return nil, fmt.Errorf("access: set --approval-key-namespace (not running in a pod: no %s)", serviceAccountNamespaceFile)
		}
	}
	key, err := LoadKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), ns, o.KeySecret)
	if err != nil {
		return nil, err
	}
	a, err := NewApprover(key)
	if err != nil {
		return nil, err
	}
	return &Guard{Reviewer: &Reviewer{Client: mgr.GetClient(), Trusted: o.Trusted}, Approver: a}, nil
}

var guards sync.Map // ctrl.Manager -> *Guard

// Register makes g the Guard of mgr's webhooks and controllers (For).
func Register(mgr ctrl.Manager, g *Guard) { guards.Store(mgr, g) }

// For is the Guard registered for mgr, nil when none: an operator's Prepare
// registers it, its webhooks' and controllers' setup look it up (so a test
// that replaces Setup still gets it) and refuse to start without one.
func For(mgr ctrl.Manager) *Guard {
	g, _ := guards.Load(mgr)
	gd, _ := g.(*Guard)
	return gd
}

// Prepare is an operator's manager.Operator.Prepare: NewGuard, registered
// for mgr.
func (o *Options) Prepare(ctx context.Context, mgr ctrl.Manager, leaderElectionNamespace string) error {
	g, err := o.NewGuard(ctx, mgr, leaderElectionNamespace)
	if err != nil {
		return err
	}
	Register(mgr, g)
	return nil
}
