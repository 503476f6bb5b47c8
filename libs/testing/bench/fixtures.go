package bench

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// Secrets names the credentials Secrets CreateSecrets makes: database ones
// (username, password) and S3 ones (the key pair).
type Secrets struct {
	Database, S3 []string
}

// CreateSecrets creates the Secrets the bench's objects name in ns (the
// operators check them before anything runs).
func CreateSecrets(ctx context.Context, c client.Client, ns string, s Secrets) error {
	var all []*corev1.Secret
	for _, n := range s.Database {
		all = append(all, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			StringData: map[string]string{"username": "app", "password": "bench"}})
	}
	for _, n := range s.S3 {
		all = append(all, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n},
			StringData: map[string]string{"accessKeyID": "bench", "secretAccessKey": "bench"}})
	}
	for _, sec := range all {
		if err := c.Create(ctx, sec); err != nil {
			return err
		}
	}
	return nil
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
