// Package webhook holds the backup operator's admission and conversion
// webhooks for BackupJob: defaulting (Defaulter), validation (Validator) and
// conversion between backup.cairn.dev/v1alpha1 and v1 (served at /convert; the
// conversion itself lives on the API types, cairn.dev/apis/backup/v1alpha1).
// Setup registers all three with a manager's webhook server.
//
// Both admission webhooks are registered for v1 only; the API server converts
// v1alpha1 requests to v1 before calling them (matchPolicy Equivalent), so
// every served version gets the same defaults and checks.
//
// The installed webhook configurations carry matchConditions
// (deploy/components/operator/webhook_match_conditions.yaml): the API server
// calls the admission webhooks for creates and for updates that change the
// spec or an annotation other than cairn.dev/skip-cleanup, never for an
// update of an object being deleted, so removing a finalizer by hand or
// setting the escape-hatch annotation works while the operator is down.
//
// For CRD installs outside envtest, the CRD needs spec.conversion pointing at
// this server: deploy/backup/crd/patches/webhook_conversion.yaml.
package webhook

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/admit"
)

// ConvertPath is the conversion webhook's path (controller-runtime's; the
// CRD's conversion names it).
const ConvertPath = "/convert"

// +kubebuilder:webhook:path=/mutate-backup-cairn-dev-v1-backupjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=backup.cairn.dev,resources=backupjobs,verbs=create;update,versions=v1,name=mbackupjob.cairn.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-backup-cairn-dev-v1-backupjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=backup.cairn.dev,resources=backupjobs,verbs=create;update,versions=v1,name=vbackupjob.cairn.dev,admissionReviewVersions=v1

// The validating webhook asks the API server whether the requester may use
// what the object refers to (libs/access).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup registers the BackupJob defaulting, validating and conversion webhooks
// with mgr's webhook server. The manager's scheme must hold both
// backup.cairn.dev/v1 and v1alpha1: conversion is only served for kinds with
// more than one version in the scheme, so a missing version is an error here
// rather than a silently absent /convert.
func Setup(mgr ctrl.Manager) error {
	validator := func(guard *access.Guard) admission.Validator[*backupv1.BackupJob] { return &Validator{Guard: guard} }
	return admit.Setup(mgr, &backupv1.BackupJob{}, *NewDefaulter(nil), validator, backupv1alpha1.GroupVersion.WithKind("BackupJob"))
}
