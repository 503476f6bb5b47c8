package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// V1FieldsAnnotation holds, as JSON ({"spec": {...}, "status": {...}}), every
// field of the backup.cairn.dev/v1 BackupJob that v1alpha1 cannot express:
// spec.database except host (engine, port, database, credentialsSecretRef),
// timeZone, activeDeadlineSeconds, suspend, storage, deletionPolicy, and the
// status fields v1alpha1 lacks. ConvertFrom writes it on every v1alpha1 object
// it returns; ConvertTo reads it back and removes it, so it is never stored.
// Where the annotation and the v1alpha1 fields overlap, the v1alpha1 fields
// win. The key is reserved: a v1 object's own value for it is not kept.
const V1FieldsAnnotation = "backup.cairn.dev/v1-fields"

// LegacyShapeAnnotation marks a v1 object converted from a v1alpha1 one
// that had no V1FieldsAnnotation (an object in the original flat shape, such
// as an old manifest given to `kubectl replace`). ConvertTo sets it; the
// BackupJob defaulting webhook removes it before anything is stored and, on
// an update, keeps the v1-only fields of the stored object instead of the
// legacy defaults, so a replace by an old manifest never resets what the
// v1alpha1 shape cannot say (engine, database, credentials, storage, time
// zone, ...). The key is reserved: ConvertFrom and an annotated ConvertTo
// drop any value a client sent.
const LegacyShapeAnnotation = "backup.cairn.dev/v1alpha1-legacy-shape"

// Legacy defaults: what ConvertTo fills in for a v1alpha1 BackupJob that has no
// V1FieldsAnnotation, i.e. one written in the original flat shape. The v1
// defaults (backupv1.BackupJobSpec.SetDefaults: timeZone,
// activeDeadlineSeconds, deletionPolicy, the port) fill the rest: the
// defaulting webhook stores them, and the API server applies the CRD's
// defaults whenever it reads the object.
const (
	// LegacyEngine is the engine of a v1alpha1 BackupJob: postgres.
	LegacyEngine = cairnv1.PostgresEngine
	// LegacyDatabase is the database a v1alpha1 BackupJob backs up.
	LegacyDatabase = "postgres"
	// LegacyCredentialsSecretSuffix: a v1alpha1 BackupJob named N logs in with
	// the Secret "N-credentials" (keys username and password).
	LegacyCredentialsSecretSuffix = "-credentials"
	// LegacyClaimSuffix: a v1alpha1 BackupJob named N writes to the
	// PersistentVolumeClaim "N-backups".
	LegacyClaimSuffix = "-backups"
)

// Keys of the v1 JSON that v1alpha1 holds itself; they are left out of
// V1FieldsAnnotation.
var (
	ownedSpecKeys     = []string{"schedule", "retentionDays", "maxRetries"}
	ownedDatabaseKeys = []string{"host"}
	ownedStatusKeys   = []string{"observedGeneration", "phase", "lastBackupTime", "conditions"}
)

var _ conversion.Convertible = &BackupJob{}

// ConvertTo converts this v1alpha1 BackupJob to the hub, backup.cairn.dev/v1.
// databaseHost becomes spec.database.host; schedule, retentionDays, maxRetries
// and the status fields map one to one. The v1 fields v1alpha1 lacks come from
// V1FieldsAnnotation, which is removed. Without that annotation the object is a
// legacy one, marked with LegacyShapeAnnotation, and gets the legacy defaults: engine postgres, database
// "postgres", credentials Secret "<name>-credentials", storage PVC
// "<name>-backups" (<name> is metadata.name, or metadata.generateName without
// its trailing "-" while the name is not generated yet).
func (src *BackupJob) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*backupv1.BackupJob)
	if !ok {
		return fmt.Errorf("converting backup.cairn.dev/v1alpha1 BackupJob: the hub is %T, want *v1.BackupJob", dstRaw)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec = backupv1.BackupJobSpec{}
	dst.Status = backupv1.BackupJobStatus{}

	if data, found := dst.Annotations[V1FieldsAnnotation]; found {
		delete(dst.Annotations, V1FieldsAnnotation)
		delete(dst.Annotations, LegacyShapeAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
		if err := restoreV1Fields(data, dst); err != nil {
			return fmt.Errorf("BackupJob %s/%s: annotation %s is not valid: %w; remove the annotation, or copy it from the object read as backup.cairn.dev/v1alpha1",
				src.Namespace, src.Name, V1FieldsAnnotation, err)
		}
	} else {
		setLegacyDefaults(src, dst)
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[LegacyShapeAnnotation] = "true"
	}

	dst.Spec.Database.Host = src.Spec.DatabaseHost
	dst.Spec.Schedule = src.Spec.Schedule
	dst.Spec.RetentionDays = src.Spec.RetentionDays
	dst.Spec.MaxRetries = copyPtr(src.Spec.MaxRetries)

	dst.Status.ObservedGeneration = src.Status.ObservedGeneration
	dst.Status.Phase = backupv1.Phase(src.Status.Phase)
	dst.Status.LastBackupTime = src.Status.LastBackupTime.DeepCopy()
	dst.Status.Conditions = nil
	for i := range src.Status.Conditions {
		dst.Status.Conditions = append(dst.Status.Conditions, *src.Status.Conditions[i].DeepCopy())
	}
	return nil
}

// ConvertFrom converts the hub, backup.cairn.dev/v1, to this version. The
// fields v1alpha1 lacks are written to V1FieldsAnnotation so that converting
// back restores them exactly.
func (dst *BackupJob) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*backupv1.BackupJob)
	if !ok {
		return fmt.Errorf("converting to backup.cairn.dev/v1alpha1 BackupJob: the hub is %T, want *v1.BackupJob", srcRaw)
	}
	data, err := v1Fields(src)
	if err != nil {
		return fmt.Errorf("BackupJob %s/%s: writing annotation %s: %w", src.Namespace, src.Name, V1FieldsAnnotation, err)
	}

	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[V1FieldsAnnotation] = data
	delete(dst.Annotations, LegacyShapeAnnotation)

	dst.Spec = BackupJobSpec{
		DatabaseHost:  src.Spec.Database.Host,
		Schedule:      src.Spec.Schedule,
		RetentionDays: src.Spec.RetentionDays,
		MaxRetries:    copyPtr(src.Spec.MaxRetries),
	}
	dst.Status = BackupJobStatus{
		ObservedGeneration: src.Status.ObservedGeneration,
		Phase:              string(src.Status.Phase),
		LastBackupTime:     src.Status.LastBackupTime.DeepCopy(),
	}
	for i := range src.Status.Conditions {
		dst.Status.Conditions = append(dst.Status.Conditions, *src.Status.Conditions[i].DeepCopy())
	}
	return nil
}

// setLegacyDefaults fills what a v1alpha1 object cannot say; see ConvertTo.
func setLegacyDefaults(src *BackupJob, dst *backupv1.BackupJob) {
	dst.Spec.Database.Engine = LegacyEngine
	dst.Spec.Database.Database = LegacyDatabase
	name := src.Name
	if name == "" {
		name = strings.TrimSuffix(src.GenerateName, "-")
	}
	if name == "" {
		return // nothing to derive names from; validation reports what is missing
	}
	dst.Spec.Database.CredentialsSecretRef.Name = name + LegacyCredentialsSecretSuffix
	dst.Spec.Storage.PVC = &cairnv1.PVCStorage{ClaimName: name + LegacyClaimSuffix}
}

// v1Fields returns the JSON of src's spec and status without the fields
// v1alpha1 holds itself.
func v1Fields(src *backupv1.BackupJob) (string, error) {
	spec, err := toMap(src.Spec)
	if err != nil {
		return "", err
	}
	deleteKeys(spec, ownedSpecKeys)
	if db, ok := spec["database"].(map[string]any); ok {
		deleteKeys(db, ownedDatabaseKeys)
	}
	status, err := toMap(src.Status)
	if err != nil {
		return "", err
	}
	deleteKeys(status, ownedStatusKeys)

	out := map[string]any{"spec": spec}
	if len(status) > 0 {
		out["status"] = status
	}
	b, err := json.Marshal(out) // map keys are sorted: the same object gives the same text
	return string(b), err
}

// restoreV1Fields sets dst's spec and status from V1FieldsAnnotation's value.
func restoreV1Fields(data string, dst *backupv1.BackupJob) error {
	var fields struct {
		Spec   backupv1.BackupJobSpec   `json:"spec"`
		Status backupv1.BackupJobStatus `json:"status"`
	}
	if err := json.Unmarshal([]byte(data), &fields); err != nil {
		return err
	}
	dst.Spec = fields.Spec
	dst.Status = fields.Status
	return nil
}

// toMap returns v's JSON object as a map, numbers kept exact (json.Number).
func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	m := map[string]any{}
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

func deleteKeys(m map[string]any, keys []string) {
	for _, k := range keys {
		delete(m, k)
	}
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// KeepV1Fields sets on bj, converted from a legacy-shape v1alpha1 object
// (LegacyShapeAnnotation), the fields v1alpha1 cannot express from old, the
// stored object it replaces: every spec field but the four v1alpha1 holds
// (spec.database.host, schedule, retentionDays, maxRetries), and the whole
// status. It removes the annotation. The BackupJob defaulting webhook calls
// it on update.
//
// The status must be set here, not left to the API server: an update through
// the main resource keeps the stored status (the CRD strategy's
// PrepareForUpdate), but it does so after admission and in the request's
// version, v1alpha1, whose status lacks the v1-only fields (lastSuccessfulTime,
// lastResult, lastArtifact, ...). Those travel in V1FieldsAnnotation, which
// the API server writes from the object this webhook returns: without the
// stored status here, they would be stored empty.
func KeepV1Fields(bj, old *backupv1.BackupJob) {
	delete(bj.Annotations, LegacyShapeAnnotation)
	spec := *old.Spec.DeepCopy()
	spec.Database.Host = bj.Spec.Database.Host
	spec.Schedule = bj.Spec.Schedule
	spec.RetentionDays = bj.Spec.RetentionDays
	spec.MaxRetries = copyPtr(bj.Spec.MaxRetries)
	bj.Spec = spec
	bj.Status = *old.Status.DeepCopy()
}
