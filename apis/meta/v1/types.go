package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DatabaseEngine names a database engine the agent can dump and restore.
// +kubebuilder:validation:Enum=postgres;mysql
type DatabaseEngine string

const (
	// PostgresEngine is PostgreSQL (pg_dump custom format / pg_restore).
	PostgresEngine DatabaseEngine = "postgres"
	// MySQLEngine is MySQL or MariaDB (mysqldump --single-transaction / mysql).
	MySQLEngine DatabaseEngine = "mysql"
)

// DatabaseRef says where a database is and how to log in to it.
// +kubebuilder:validation:XValidation:rule="self.engine != 'postgres' || size(self.database) <= 63",message="database: at most 63 characters for postgres",fieldPath=".database"
type DatabaseRef struct {
	// Engine of the database server: postgres or mysql (MySQL and MariaDB).
	Engine DatabaseEngine `json:"engine"`
	// Host name or address of the database server, as the backup pods resolve it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]+)?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$')`,message="host: use a DNS name or an IP address, without a scheme, port, spaces or a leading '-'"
	Host string `json:"host"`
	// Port of the database server. Defaults to 5432 for postgres, 3306 for mysql.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// Database (schema) name to back up or restore into: letters, digits
	// and "_ $ . -", starting with a letter, digit or "_"; at most 63
	// characters for postgres, 64 for mysql.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z0-9_][A-Za-z0-9_$.-]*$')`,message="database: use letters, digits and _ $ . - starting with a letter, digit or _ (no leading '-', '=', spaces, quotes or slashes: the name reaches database tools)"
	Database string `json:"database"`
	// CredentialsSecretRef names a Secret with the keys `username` and `password`.
	CredentialsSecretRef LocalObjectReference `json:"credentialsSecretRef"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the object: a DNS-1123 subdomain (lowercase letters, digits, '-' and '.').
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// StorageSpec is where artifacts are kept: exactly one of pvc or s3.
// +kubebuilder:validation:XValidation:rule="has(self.pvc) != has(self.s3)",message="storage: set exactly one of pvc or s3"
type StorageSpec struct {
	// PVC stores artifacts on a mounted PersistentVolumeClaim.
	// +optional
	PVC *PVCStorage `json:"pvc,omitempty"`
	// S3 stores artifacts in an S3-compatible bucket.
	// +optional
	S3 *S3Storage `json:"s3,omitempty"`
}

// PVCStorage keeps artifacts on a PersistentVolumeClaim in the same namespace.
type PVCStorage struct {
	// ClaimName of the PersistentVolumeClaim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClaimName string `json:"claimName"`
	// SubPath inside the volume under which artifacts are written: a relative
	// path without "..".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('/') && !self.matches(r'(^|/)\.\.(/|$)')`,message="subPath: use a relative path without \"..\""
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r'[[:cntrl:]\\]')`,message="subPath: no control characters or backslashes"
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r'(^|/)_migrations(/|$)')`,message="subPath: the path segment \"_migrations\" is reserved for MigrationJob exports; choose another path"
	SubPath string `json:"subPath,omitempty"`
}

// S3Storage keeps artifacts in an S3-compatible bucket.
type S3Storage struct {
	// Endpoint of the S3 service, host[:port] or an http(s) URL.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^(https?://)?([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?$')`,message="endpoint: use host[:port] or http(s)://host[:port], without a path, query or credentials"
	Endpoint string `json:"endpoint"`
	// Bucket name: letters, digits, ".", "-" and "_", starting and ending
	// with a letter or digit.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$')`,message="bucket: use letters, digits, '.', '-' and '_', starting and ending with a letter or digit"
	Bucket string `json:"bucket"`
	// Prefix for every object written, e.g. "prod/": segments of letters,
	// digits, ".", "_" and "-" separated by "/".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]*$') && !self.matches(r'(^|/)\.\.?(/|$)')`,message="prefix: use segments of letters, digits, '.', '_' and '-' separated by '/' (no '.' or '..' segment, no leading or double '/')"
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r'(^|/)_migrations(/|$)')`,message="prefix: the path segment \"_migrations\" is reserved for MigrationJob exports; choose another path"
	Prefix string `json:"prefix,omitempty"`
	// Region of the bucket, if the service needs one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9-]*$')`,message="region: use lowercase letters, digits and '-', e.g. eu-central-1"
	Region string `json:"region,omitempty"`
	// Insecure uses plain HTTP instead of HTTPS.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// PartSizeMiB is the size of each part of a multipart upload, 5 to 512
	// MiB (the agent's default, 16, when empty). Larger parts mean fewer
	// requests for large databases and more memory per upload.
	// +optional
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=512
	PartSizeMiB *int32 `json:"partSizeMiB,omitempty"`
	// CredentialsSecretRef names a Secret with the keys `accessKeyID` and
	// `secretAccessKey`.
	CredentialsSecretRef LocalObjectReference `json:"credentialsSecretRef"`
}

// Artifact is one stored backup, as the agent reported it.
type Artifact struct {
	// Path of the artifact inside the store.
	Path string `json:"path"`
	// Size in bytes of the stored (compressed) artifact.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Checksum of the stored artifact, "sha256:<hex>".
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// EncryptedTo are the fingerprints of the age recipients the artifact
	// is encrypted to ("age-fp:" and the first 16 hex digits of the SHA-256
	// of the public key); empty when it is not encrypted.
	// +optional
	EncryptedTo []string `json:"encryptedTo,omitempty"`
}

// EncryptionSpec encrypts every artifact on the agent, before it leaves the
// pod, with age (age-encryption.org) to the recipients given: the dump is
// compressed, then encrypted, then stored, and no plaintext is written
// anywhere. Any one recipient's identity (private key) decrypts. The
// catalog records each artifact's recipients (public keys and
// fingerprints), never a private key. Changing the recipients applies to
// the next backup; artifacts already stored keep theirs.
type EncryptionSpec struct {
	// Recipients are age X25519 public keys ("age1…", as `age-keygen`
	// prints them), one per line, "#" comments allowed — e.g. a team key
	// and an escrow key — held in a key of a Secret or a ConfigMap.
	Recipients RecipientsSource `json:"recipients"`
}

// RecipientsSource is where the recipients are: exactly one of a Secret
// key or a ConfigMap key, in the object's namespace.
// +kubebuilder:validation:XValidation:rule="has(self.secretKeyRef) != has(self.configMapKeyRef)",message="encryption.recipients: set exactly one of secretKeyRef or configMapKeyRef"
type RecipientsSource struct {
	// SecretKeyRef names a Secret key holding the recipients.
	// +optional
	SecretKeyRef *KeySelector `json:"secretKeyRef,omitempty"`
	// ConfigMapKeyRef names a ConfigMap key holding the recipients (public
	// keys are not secret).
	// +optional
	ConfigMapKeyRef *KeySelector `json:"configMapKeyRef,omitempty"`
}

// DecryptionSpec is how a restore decrypts an encrypted artifact.
type DecryptionSpec struct {
	// IdentitySecretRef names a Secret key holding age X25519 private keys
	// ("AGE-SECRET-KEY-1…", as `age-keygen` writes them), one per line. A
	// restore whose artifact is encrypted to none of them fails before
	// the target is touched, with a condition naming the recipients the
	// artifact needs. An artifact that is not encrypted restores as usual.
	IdentitySecretRef KeySelector `json:"identitySecretRef"`
}

// KeySelector names one key of a Secret or ConfigMap in the same namespace.
type KeySelector struct {
	// Name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// Key in its data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ServerInfo is a database server as the agent found it at the start of a
// run (its result's server field).
type ServerInfo struct {
	// Engine is postgres, mysql (Oracle MySQL) or mariadb.
	// +kubebuilder:validation:MaxLength=32
	Engine string `json:"engine"`
	// Version is the server's version, e.g. 18.6, 9.7.4, 11.8.9.
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`
}

// AgentRun records one agent Job an object runs (libs/agentjob.Run): its
// name, stored before the Job is created, so a restarted operator finds
// that Job and never creates a second one; when it started (set when the
// Job was created: a run with a start time whose Job is gone was deleted
// before it finished) and when it finished.
type AgentRun struct {
	// JobName is the name of the Job.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// StartTime is when the Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the Job finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// Created reports whether the run's Job was created (its start time is
// recorded).
func (r *AgentRun) Created() bool { return r.StartTime != nil }
