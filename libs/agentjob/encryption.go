package agentjob

import (
	corev1 "k8s.io/api/core/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/references"
)

// Encryption is an agent run's client-side encryption (age): the
// recipients (public keys) a backup encrypts to, from a Secret or ConfigMap
// key, and the identity (private keys) a restore decrypts with, from a
// Secret key. Both reach the agent as environment variables read by the
// kubelet from their objects (contract.EnvEncryptionRecipients,
// contract.EnvEncryptionIdentity): never a value in the Pod spec, never a
// file the agent writes.
type Encryption struct {
	Recipients *cairnv1.RecipientsSource
	Identity   *cairnv1.KeySelector
}

// BackupEncryption is the Encryption of a backup with spec e (nil: none).
func BackupEncryption(e *cairnv1.EncryptionSpec) *Encryption {
	if e == nil {
		return nil
	}
	r := e.Recipients
	return &Encryption{Recipients: &r}
}

// RestoreEncryption is the Encryption of a restore with spec d (nil: none).
func RestoreEncryption(d *cairnv1.DecryptionSpec) *Encryption {
	if d == nil {
		return nil
	}
	id := d.IdentitySecretRef
	return &Encryption{Identity: &id}
}

func (e *Encryption) env() []corev1.EnvVar {
	if e == nil {
		return nil
	}
	var env []corev1.EnvVar
	switch r := e.Recipients; {
	case r == nil:
	case r.SecretKeyRef != nil:
		env = append(env, secretEnv(contract.EnvEncryptionRecipients, r.SecretKeyRef.Name, r.SecretKeyRef.Key))
	case r.ConfigMapKeyRef != nil:
		env = append(env, corev1.EnvVar{Name: contract.EnvEncryptionRecipients, ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: r.ConfigMapKeyRef.Name}, Key: r.ConfigMapKeyRef.Key,
			}}})
	}
	if id := e.Identity; id != nil {
		env = append(env, secretEnv(contract.EnvEncryptionIdentity, id.Name, id.Key))
	}
	return env
}

// EncryptionReferences are the objects e needs before a run can start in
// namespace: the recipients' Secret or ConfigMap, whose key must hold age
// public keys, the identity's Secret, whose key must hold age private keys
// (checked by references.Checker: a bad key stalls the object, reason
// InvalidKeys, before any Job). field is the spec path of the
// encryption (e.g. "spec.encryption").
func EncryptionReferences(namespace string, e *Encryption, field string) []references.Ref {
	if e == nil {
		return nil
	}
	var refs []references.Ref
	switch r := e.Recipients; {
	case r == nil:
	case r.SecretKeyRef != nil:
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: r.SecretKeyRef.Name,
			Keys: []string{r.SecretKeyRef.Key}, Field: field + ".recipients.secretKeyRef", Content: references.AgeRecipients})
	case r.ConfigMapKeyRef != nil:
		refs = append(refs, references.Ref{Kind: references.ConfigMap, Namespace: namespace, Name: r.ConfigMapKeyRef.Name,
			Keys: []string{r.ConfigMapKeyRef.Key}, Field: field + ".recipients.configMapKeyRef", Content: references.AgeRecipients})
	}
	if id := e.Identity; id != nil {
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: id.Name,
			Keys: []string{id.Key}, Field: field + ".identitySecretRef", Content: references.AgeIdentities})
	}
	return refs
}
