package agentjob

import (
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/references"
)

// References are the objects an agent run of db (nil for none) against
// storage needs before it can start in namespace: the database credentials
// Secret with its username and password keys, the PVC, the S3 credentials
// Secret with its key pair. field is the spec path of db's parent
// (e.g. "spec" or "spec.target").
func References(namespace string, db *cairnv1.DatabaseRef, dbField string, storage cairnv1.StorageSpec, storageField string) []references.Ref {
	var refs []references.Ref
	if db != nil {
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: db.CredentialsSecretRef.Name,
			Keys: []string{DatabaseUsernameKey, DatabasePasswordKey}, Field: dbField + ".credentialsSecretRef"})
	}
	switch {
	case storage.PVC != nil:
		refs = append(refs, references.Ref{Kind: references.PVC, Namespace: namespace, Name: storage.PVC.ClaimName, Field: storageField + ".pvc.claimName"})
	case storage.S3 != nil:
		refs = append(refs, references.Ref{Kind: references.Secret, Namespace: namespace, Name: storage.S3.CredentialsSecretRef.Name,
			Keys: []string{S3AccessKeyIDKey, S3SecretAccessKeyKey}, Field: storageField + ".s3.credentialsSecretRef"})
	}
	return refs
}
