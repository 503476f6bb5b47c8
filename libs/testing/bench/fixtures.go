package bench

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// The fixtures every operator's bench shares: its scheme, the Secrets its
// objects name, the database and store they refer to.

// Scheme is client-go's scheme plus the API groups add installs.
func Scheme(add ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	for _, a := range add {
		utilruntime.Must(a(s))
	}
	return s
}

// Database is a PostgreSQL database host/name whose credentials are in
// Secret secret.
func Database(host, name, secret string) cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: host, Database: name,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: secret}}
}

// S3Store is the benches' bucket, its credentials in Secret secret.
func S3Store(secret string) cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3:9000", Bucket: "backups",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: secret}}}
}
