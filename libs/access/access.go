// Package access checks that whoever asks Cairn to use an object may use it
// themselves: a BackupJob naming a credentials Secret, a MigrationJob naming
// a kubeconfig Secret, a RestoreJob reading another namespace's BackupJob.
// The operators read those objects with their own, wider identity; without
// this check anyone allowed to create a Cairn object would borrow it.
//
// Two halves:
//
//   - Reviewer, in the validating webhooks: one SubjectAccessReview per
//     reference for the request's user (user, groups, uid, extra), refused
//     with a message naming the field, the verb and the object.
//   - Approver, in the defaulting webhooks and the controllers: the
//     defaulting webhook signs the object's reference set into the
//     annotation Annotation (an HMAC with a key only the operator holds,
//     kept in a Secret in the operator's namespace), the validating webhook
//     refuses an object whose annotation does not match its final
//     references, and the controller refuses to act on an object whose
//     annotation is missing or does not match (an object created or changed
//     while the webhook was not installed): condition ReferencesNotApproved,
//     nothing created.
//
// See docs/operators.md, "Who may make Cairn use what".
package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotation carries the operator's signature over an object's references,
// written by its defaulting webhook. Users cannot make a valid one: the key
// is in the operator's namespace.
const Annotation = "cairn.dev/approved-references"

// Check is one thing the requester must be allowed to do for an object to
// be admitted: e.g. get Secret team-a/db-admin, named by
// spec.database.credentialsSecretRef.
type Check struct {
	// Verb, Group and Resource of the SubjectAccessReview, e.g. "get", "",
	// "secrets".
	Verb, Group, Resource string
	// Namespace and Name of the object.
	Namespace, Name string
	// Kind names the object in messages, e.g. "secret".
	Kind string
	// Field is the spec field that refers to it, e.g.
	// "spec.database.credentialsSecretRef".
	Field string
	// Uses are where the object sends this credential and the data it
	// guards, "field=value" (e.g. "spec.database.host=pg.shop.svc"),
	// sorted: every destination field of the object (kinds.go). They are
	// part of what is reviewed and signed: an update that changes one is
	// a new use of every credential the object names, reviewed again and
	// re-signed, as on create.
	Uses []string
	// Because says why an update asks c again, for the refusal: set by
	// Changed on a check whose reference stays and whose Uses change
	// (naming the fields that changed), and by Weakening.
	Because string
}

// GetSecret is the check that the requester may read Secret ns/name.
func GetSecret(ns, name, field string) Check {
	return Check{Verb: "get", Resource: "secrets", Namespace: ns, Name: name, Kind: "secret", Field: field}
}

// GetClaim is the check that the requester may read PersistentVolumeClaim
// ns/name.
func GetClaim(ns, name, field string) Check {
	return Check{Verb: "get", Resource: "persistentvolumeclaims", Namespace: ns, Name: name, Kind: "persistentvolumeclaim", Field: field}
}

// GetConfigMap is the check that the requester may read ConfigMap ns/name.
func GetConfigMap(ns, name, field string) Check {
	return Check{Verb: "get", Resource: "configmaps", Namespace: ns, Name: name, Kind: "configmap", Field: field}
}

// PatchSecret is the check that the requester may patch Secret ns/name.
func PatchSecret(ns, name, field string) Check {
	return Check{Verb: "patch", Resource: "secrets", Namespace: ns, Name: name, Kind: "secret", Field: field}
}

// ref identifies what c asks, without the field and the uses.
func (c Check) ref() string {
	return c.Verb + " " + c.Group + "/" + c.Resource + " " + c.Namespace + "/" + c.Name
}

// key identifies what c asks and where it is used, without the field.
func (c Check) key() string {
	if len(c.Uses) == 0 {
		return c.ref()
	}
	return c.ref() + " @ " + strings.Join(c.Uses, "; ")
}

// Changed are the checks of next that old does not ask (by verb, resource,
// namespace and name) or asks for other uses (another host, endpoint,
// bucket, ...): what an update adds or redirects. A redirected check's
// Because names the fields whose values changed.
func Changed(old, next []Check) []Check {
	had := map[string]bool{}
	uses := map[string][]string{}
	for _, c := range old {
		had[c.key()] = true
		uses[c.ref()] = c.Uses
	}
	var out []Check
	for _, c := range next {
		if had[c.key()] {
			continue
		}
		if before, ok := uses[c.ref()]; ok {
			c.Because = "this update changes " + strings.Join(changedFields(before, c.Uses), ", ") + ", where it is used"
		}
		out = append(out, c)
	}
	return out
}

// changedFields are the fields of the "field=value" lists a and b whose
// values differ or that only one has, sorted.
func changedFields(a, b []string) []string {
	va, vb := map[string]string{}, map[string]string{}
	for _, u := range a {
		f, v, _ := strings.Cut(u, "=")
		va[f] = v
	}
	for _, u := range b {
		f, v, _ := strings.Cut(u, "=")
		vb[f] = v
	}
	var out []string
	for f, v := range va {
		if w, ok := vb[f]; !ok || w != v {
			out = append(out, f)
		}
	}
	for f := range vb {
		if _, ok := va[f]; !ok {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// Reviewer sends SubjectAccessReviews for admission requests.
type Reviewer struct {
	// Client creates SubjectAccessReviews (the operator needs create on
	// authorization.k8s.io/subjectaccessreviews).
	Client client.Client
	// Trusted are user names whose requests are not reviewed: the
	// orchestrator's ServiceAccount, which creates BackupJobs, RestoreJobs
	// and MigrationJobs from ProtectionPlans whose references its own
	// webhook reviewed for the plan's requester.
	Trusted []string

	reviews    atomic.Int64
	reviewTime atomic.Int64 // nanoseconds spent waiting for them
}

// Reviews is how many SubjectAccessReviews r has sent.
func (r *Reviewer) Reviews() int64 { return r.reviews.Load() }

// ReviewTime is how long r has waited for the API server's answers to
// them, in total (the bench's figure of what the checks add to a create).
func (r *Reviewer) ReviewTime() time.Duration { return time.Duration(r.reviewTime.Load()) }

// Review returns nil when user may do every check, a Forbidden error for gr
// name naming each refused field, verb and object otherwise, or another
// error when the API server could not tell.
func (r *Reviewer) Review(ctx context.Context, user authenticationv1.UserInfo, gr schema.GroupResource, name string, checks []Check) error {
	if slices.Contains(r.Trusted, user.Username) {
		return nil
	}
	var refused []string
	seen := map[string]bool{}
	for _, c := range checks {
		if seen[c.ref()] {
			continue
		}
		seen[c.ref()] = true
		allowed, err := r.allowed(ctx, user, c)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("%s: asking whether user %q may %s %s %q in namespace %q: %w", c.Field, user.Username, c.Verb, c.Kind, c.Name, c.Namespace, err))
		}
		if !allowed {
			refused = append(refused, fmt.Sprintf("%s: user %q may not %s %s %q in namespace %q", c.field(), user.Username, c.Verb, c.Kind, c.Name, c.Namespace))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return apierrors.NewForbidden(gr, name, errors.New(strings.Join(refused, "; ")+
		" (a Cairn object may only use what its requester may use)"))
}

// field is c's field for a message, with why it is asked again.
func (c Check) field() string {
	if c.Because == "" {
		return c.Field
	}
	return c.Field + " (" + c.Because + ")"
}

func (r *Reviewer) allowed(ctx context.Context, user authenticationv1.UserInfo, c Check) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: c.Namespace, Verb: c.Verb, Group: c.Group, Resource: c.Resource, Name: c.Name,
		},
	}}
	r.reviews.Add(1)
	t0 := time.Now()
	err := r.Client.Create(ctx, sar)
	r.reviewTime.Add(int64(time.Since(t0)))
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// Approver signs and verifies reference sets.
type Approver struct{ key []byte }

// NewApprover returns an Approver with key (at least 32 bytes).
func NewApprover(key []byte) (*Approver, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("access: the approval key has %d bytes; it needs at least 32", len(key))
	}
	return &Approver{key: slices.Clone(key)}, nil
}

// Sign is the annotation value approving checks for an object of kind gk in
// namespace ns. It depends on the set of (verb, resource, namespace, name,
// uses) only — not on the object's name (unknown to a defaulting webhook
// when generateName is used), uid, generation or the fields that name
// them. Version v2 signs the uses (where each credential and the data go);
// a v1 annotation (references only) approves nothing: such an object is
// approved again by an update through the webhook (NotApproved says how).
func (a *Approver) Sign(gk schema.GroupKind, ns string, checks []Check) string {
	keys := make([]string, 0, len(checks))
	for _, c := range checks {
		keys = append(keys, c.key())
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "cairn approved references v2\n%s\n%s\n%s", gk, ns, strings.Join(keys, "\n"))
	return "v2." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Approved reports whether obj's annotation approves checks.
func (a *Approver) Approved(obj metav1.Object, gk schema.GroupKind, checks []Check) bool {
	got, ok := obj.GetAnnotations()[Annotation]
	return ok && hmac.Equal([]byte(got), []byte(a.Sign(gk, obj.GetNamespace(), checks)))
}

// Approve sets obj's annotation to approve checks.
func (a *Approver) Approve(obj metav1.Object, gk schema.GroupKind, checks []Check) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[Annotation] = a.Sign(gk, obj.GetNamespace(), checks)
	obj.SetAnnotations(ann)
}

// NotApproved is the message of a controller's ReferencesNotApproved
// condition for obj (of kind) whose annotation does not approve checks.
func NotApproved(obj metav1.Object, kind string, checks []Check) string {
	var refs []string
	for _, c := range checks {
		refs = append(refs, fmt.Sprintf("%s %s %q", c.Field, c.Kind, c.Name))
	}
	why := "has no annotation " + Annotation
	if _, ok := obj.GetAnnotations()[Annotation]; ok {
		why = "has an annotation " + Annotation + " that does not approve them"
	}
	return fmt.Sprintf("the objects this %s refers to (%s) were not approved by the operator's admission webhook: it %s "+
		"(created or changed while the webhook was not installed?); nothing runs until an update passes the webhook, "+
		"which checks that its requester may use them (e.g. kubectl annotate --overwrite ... cairn.dev/approve=1)",
		kind, strings.Join(refs, ", "), why)
}

// KeyLength is the length of a generated approval key.
const KeyLength = 32

// KeySecretKey is the data key holding the approval key in its Secret.
const KeySecretKey = "key"

// LoadKey returns the approval key kept in Secret ns/name. The platform
// ships that Secret empty (deploy/components/operator/approval_key.yaml,
// with a Role that lets the operator get and patch it and no other Secret):
// the first start fills it with a random key by a patch conditional on the
// Secret's resourceVersion, so replicas starting together agree on one key
// (the loser of the race reads the winner's). Where the Secret does not
// exist (an install without it, tests) LoadKey creates it, which needs
// create on Secrets there. live reads past any cache (mgr.GetAPIReader());
// w patches and creates.
func LoadKey(ctx context.Context, live client.Reader, w client.Writer, ns, name string) ([]byte, error) {
	for range 3 {
		s := &corev1.Secret{}
		err := live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("access: reading the approval key Secret %s/%s: %w", ns, name, err)
		}
		if err == nil && len(s.Data[KeySecretKey]) > 0 {
			k := s.Data[KeySecretKey]
			if len(k) < KeyLength {
				return nil, fmt.Errorf("access: Secret %s/%s: key %q has %d bytes, need at least %d", ns, name, KeySecretKey, len(k), KeyLength)
			}
			return k, nil
		}
		k := make([]byte, KeyLength)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		if err == nil { // shipped empty: fill it, unless another replica did first
			base := s.DeepCopy()
			s.Data = map[string][]byte{KeySecretKey: k}
			perr := w.Patch(ctx, s, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
			if perr == nil {
				return k, nil
			}
			if !apierrors.IsConflict(perr) {
				return nil, fmt.Errorf("access: filling the approval key Secret %s/%s: %w", ns, name, perr)
			}
			continue // another replica filled it: read it
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "cairn"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{KeySecretKey: k},
		}
		err = w.Create(ctx, s)
		if err == nil {
			return k, nil
		}
		if !apierrors.IsAlreadyExists(err) { // another replica made it: read it
			return nil, fmt.Errorf("access: creating the approval key Secret %s/%s (the platform ships it: deploy/components/operator/approval_key.yaml): %w", ns, name, err)
		}
	}
	return nil, fmt.Errorf("access: the approval key Secret %s/%s changed while being read", ns, name)
}
