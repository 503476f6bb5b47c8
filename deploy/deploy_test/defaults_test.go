package deploy_test

import (
	"encoding/json"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// TestCRDDefaultsAreTheAPIConstants: the defaults the API server applies (the
// CRDs' +kubebuilder:default markers, in every served version) are the
// exported Default… constants of cairn.dev/apis, which the webhooks use too.
func TestCRDDefaultsAreTheAPIConstants(t *testing.T) {
	want := map[string]map[string]map[string]any{ // CRD → version → spec field → default
		"backupjobs.backup.cairn.dev": {
			"v1": {
				"timeZone":              backupv1.DefaultTimeZone,
				"maxRetries":            backupv1.DefaultMaxRetries,
				"activeDeadlineSeconds": backupv1.DefaultActiveDeadlineSeconds,
				"deletionPolicy":        backupv1.DefaultDeletionPolicy,
			},
			"v1alpha1": {
				"maxRetries": backupv1.DefaultMaxRetries,
			},
		},
		"restorejobs.restore.cairn.dev": {
			"v1": {
				"maxRetries":            restorev1.DefaultMaxRetries,
				"activeDeadlineSeconds": restorev1.DefaultActiveDeadlineSeconds,
			},
		},
		// transfer and cutover: whole objects (their fields' own defaults
		// apply too when they are given in part).
		"migrationjobs.migration.cairn.dev": {
			"v1": {
				"mode":                  migrationv1.DefaultMode,
				"transfer":              map[string]any{"method": migrationv1.DefaultTransferMethod, "parallelism": migrationv1.DefaultParallelism},
				"verify":                migrationv1.DefaultVerify,
				"cutover":               map[string]any{"mode": migrationv1.DefaultCutoverMode, "sourceReadOnly": false},
				"allowNonEmptyTarget":   false,
				"dryRun":                false,
				"maxRetries":            migrationv1.DefaultMaxRetries,
				"activeDeadlineSeconds": migrationv1.DefaultActiveDeadlineSeconds,
			},
		},
	}
	objs := build(t, "platform")
	for name, versions := range want {
		var crd apiextensionsv1.CustomResourceDefinition
		into(t, find(t, objs, "CustomResourceDefinition", name), &crd)
		for _, v := range crd.Spec.Versions {
			fields, ok := versions[v.Name]
			if !ok {
				t.Errorf("%s: version %s has no expected defaults listed here", name, v.Name)
				continue
			}
			props := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties
			for field, value := range fields {
				d := props[field].Default
				if d == nil {
					t.Errorf("%s %s: spec.%s has no default, want %v", name, v.Name, field, value)
					continue
				}
				if got, want := string(d.Raw), jsonOf(t, value); got != want {
					t.Errorf("%s %s: spec.%s defaults to %s, want %s (the apis constant)", name, v.Name, field, got, want)
				}
			}
			for field, p := range props {
				if _, listed := fields[field]; p.Default != nil && !listed {
					t.Errorf("%s %s: spec.%s defaults to %s, which no apis constant names", name, v.Name, field, p.Default.Raw)
				}
			}
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
