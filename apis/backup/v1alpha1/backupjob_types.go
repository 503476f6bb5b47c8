package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupJobSpec is the original, flat desired state: one database host, a
// schedule, a retention and a retry count. Everything else a backup needs
// (engine, credentials, storage, time zone, ...) exists only in
// backup.cairn.dev/v1; see ConvertTo for what a v1alpha1 object gets.
type BackupJobSpec struct {
	// DatabaseHost is the host name or address of the database server
	// (spec.database.host in v1).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]+)?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$')`,message="databaseHost: use a DNS name or an IP address, without a scheme, port, spaces or a leading '-'"
	DatabaseHost string `json:"databaseHost"`
	// Schedule in standard 5-field cron format, e.g. "0 2 * * *" for 02:00
	// every day (UTC unless the v1 timeZone says otherwise).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`
	// RetentionDays is how long stored artifacts are kept; 7 days when
	// absent (v1's spec.retentionDays: no schema default there either).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3650
	RetentionDays int32 `json:"retentionDays,omitempty"`
	// MaxRetries is how many times Kubernetes retries one failed run.
	// Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	MaxRetries *int32 `json:"maxRetries,omitempty"`
}

// BackupJobStatus is the observed state, written by the backup operator only.
type BackupJobStatus struct {
	// ObservedGeneration is the metadata.generation last acted on. -1 until
	// the operator has seen the object.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state in one word. It takes the values of v1's
	// Phase: Pending, Scheduled, Running, Succeeded, Failed, Suspended or
	// Deleting.
	// +optional
	// +kubebuilder:validation:Enum=Pending;Scheduled;Running;Succeeded;Failed;Suspended;Deleting
	Phase string `json:"phase,omitempty"`
	// LastBackupTime is when the last finished run finished, either result.
	// +optional
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`
	// Conditions: Ready, Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupJob backs up one database on a schedule. Deprecated: use
// backup.cairn.dev/v1, which this version converts to and from.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="backup.cairn.dev/v1alpha1 BackupJob is deprecated; use backup.cairn.dev/v1"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name: at most 52 characters, because the CronJob is named after the BackupJob"
// +kubebuilder:resource:shortName=bj;bjob,categories=cairn
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.databaseHost`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastBackupTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the desired state.
	Spec BackupJobSpec `json:"spec"`
	// Status is the observed state.
	// +kubebuilder:default={"observedGeneration":-1}
	Status BackupJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BackupJobList is a list of BackupJobs.
type BackupJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BackupJob{}, &BackupJobList{})
}
