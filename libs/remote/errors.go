package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Condition reasons of the errors Get returns.
const (
	// SecretNotFoundReason: the kubeconfig Secret does not exist.
	SecretNotFoundReason = "KubeconfigSecretNotFound"
	// KeyMissingReason: the Secret has no (non-empty) value under the key.
	KeyMissingReason = "KubeconfigKeyMissing"
	// InvalidReason: the value is not a usable kubeconfig, or one that would
	// run a program or read a file in the operator.
	InvalidReason = "KubeconfigInvalid"
	// UnreachableReason: the cluster did not answer (in time).
	UnreachableReason = "RemoteClusterUnreachable"
	// UnauthorizedReason: the cluster answered and refused the credentials.
	UnauthorizedReason = "RemoteClusterUnauthorized"
)

// Sentinels for errors.Is.
var (
	ErrSecretNotFound = errors.New("kubeconfig Secret not found")
	ErrKeyMissing     = errors.New("kubeconfig key missing")
	ErrInvalid        = errors.New("kubeconfig invalid")
	ErrUnreachable    = errors.New("remote cluster unreachable")
	ErrUnauthorized   = errors.New("remote cluster refused the credentials")
)

// Error is a failure to get a remote client, ready for a status condition:
// Reason is the condition reason, Error() the message.
type Error struct {
	Reason  string
	Ref     SecretRef
	Message string
	// Err wraps the sentinel and the cause.
	Err error
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying again later, with the same Secret, may
// succeed (the cluster was unreachable). The other reasons need the Secret
// fixed — and a change of it wakes a controller that watches it.
func (e *Error) Retryable() bool { return e.Reason == UnreachableReason }

// Classify turns the error of a request made with the client Get returned
// for ref into an *Error when the remote cluster is the cause — it did not
// answer (in time): UnreachableReason; it refused the credentials:
// UnauthorizedReason — so the condition says so. Any other error (NotFound,
// Conflict, a refused object, ...) is returned as it is, and nil stays nil.
func Classify(ref SecretRef, err error) error {
	var re *Error
	switch {
	case err == nil || errors.As(err, &re):
		return err
	case apierrors.IsUnauthorized(err):
		return classify(SecretRef{Namespace: ref.Namespace, Name: ref.Name, Key: ref.key()}, "", err)
	case isNetwork(err):
		return classify(SecretRef{Namespace: ref.Namespace, Name: ref.Name, Key: ref.key()}, "", err)
	}
	return err
}

func isNetwork(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err)
}

// classify turns a failed probe of host into an *Error.
func classify(ref SecretRef, host string, err error) *Error {
	cluster := "the cluster"
	if host != "" {
		cluster = "cluster " + host
	}
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return &Error{Reason: UnauthorizedReason, Ref: ref, Err: errors.Join(ErrUnauthorized, err),
			Message: fmt.Sprintf("%s (from %s) refused the credentials: %s", cluster, ref, Sanitize(err.Error()))}
	}
	return &Error{Reason: UnreachableReason, Ref: ref, Err: errors.Join(ErrUnreachable, err),
		Message: fmt.Sprintf("%s (from %s) unreachable: %s", cluster, ref, Sanitize(err.Error()))}
}

// MaxDetail is the most of a remote error's text (which may quote the
// remote server's reply) a message keeps.
const MaxDetail = 200

// Sanitize keeps at most MaxDetail characters of s, printable ASCII only
// (anything else becomes '?'): a remote server's reply never reaches a
// condition beyond a short, harmless excerpt.
func Sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= MaxDetail {
			b.WriteString("...")
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}
