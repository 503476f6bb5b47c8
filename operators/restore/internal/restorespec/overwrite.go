package restorespec

import (
	"context"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// SourceBackupJob is the BackupJob a RestoreJob's source refers to: the
// referenced BackupJob, or the one named by the store's catalog key (which
// may not exist in this cluster). ok is false for a source naming neither.
func SourceBackupJob(rj *restorev1.RestoreJob) (key types.NamespacedName, ok bool) {
	switch src := rj.Spec.Source; {
	case src.BackupJob != nil && src.BackupJob.Name != "":
		return types.NamespacedName{Namespace: rj.Namespace, Name: src.BackupJob.Name}, true
	case src.Store != nil:
		ns, name, found := strings.Cut(src.Store.BackupJob, "/")
		if found && ns != "" && name != "" {
			return types.NamespacedName{Namespace: ns, Name: name}, true
		}
	}
	return types.NamespacedName{}, false
}

// OverwriteError returns the field error refusing rj when its target is the
// database bj backs up and spec.allowOverwriteSource is not true, else nil.
// rj's spec should be defaulted.
func OverwriteError(rj *restorev1.RestoreJob, bj *backupv1.BackupJob) *field.Error {
	if rj.Spec.AllowOverwriteSource || !SameDatabase(rj.Spec.Target, rj.Namespace, bj.Spec.Database, bj.Namespace) {
		return nil
	}
	t := rj.Spec.Target
	return field.Forbidden(field.NewPath("spec", "target"), fmt.Sprintf(
		"this is the database BackupJob %s/%s backs up (%s %s:%d/%s): restoring would overwrite it; "+
			"restore into another database, or set spec.allowOverwriteSource: true to overwrite it on purpose",
		bj.Namespace, bj.Name, t.Engine, t.Host, t.Port, t.Database))
}

// CheckOverwrite reads the BackupJob rj's source refers to and applies
// OverwriteError. A BackupJob that does not exist is no conflict; found says
// whether it exists.
func CheckOverwrite(ctx context.Context, r client.Reader, rj *restorev1.RestoreJob) (ferr *field.Error, found bool, err error) {
	key, ok := SourceBackupJob(rj)
	if !ok {
		return nil, false, nil
	}
	bj := &backupv1.BackupJob{}
	if err := r.Get(ctx, key, bj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading BackupJob %s: %w", key, err)
	}
	return OverwriteError(rj, bj), true, nil
}

// SameDatabase reports whether a (as seen from namespace aNS) and b (from
// bNS) name the same database: the same engine, host, port and database
// name. An empty port is the engine's default. Host names are compared as
// Kubernetes Service names resolve in a pod of that namespace: "db",
// "db.shop", "db.shop.svc" and "db.shop.svc.cluster.local" seen from
// namespace shop are one host. Different names for one server (an IP address
// and a name, an ExternalName Service) are not recognised.
func SameDatabase(a cairnv1.DatabaseRef, aNS string, b cairnv1.DatabaseRef, bNS string) bool {
	port := func(d cairnv1.DatabaseRef) int32 {
		if d.Port == 0 {
			return cairnv1.DefaultPort(d.Engine)
		}
		return d.Port
	}
	sameName := a.Database == b.Database
	if a.Engine == cairnv1.MySQLEngine {
		// A MySQL server with lower_case_table_names=1 (the default on
		// case-insensitive file systems) names SHOP and shop the same
		// database: when in doubt, it is the same one.
		sameName = strings.EqualFold(a.Database, b.Database)
	}
	return a.Engine == b.Engine &&
		sameName &&
		port(a) == port(b) &&
		CanonicalHost(a.Host, aNS) == CanonicalHost(b.Host, bNS)
}

// CanonicalHost names host as a pod in namespace ns resolves it: lowercase,
// without a trailing dot; a one-label name is a Service in ns
// ("db" → "db.ns.svc"), a two-label name a Service in the named namespace
// ("db.shop" → "db.shop.svc"), and anything after a ".svc" label is the
// cluster domain and dropped. IP addresses and other names stay as they are.
func CanonicalHost(host, ns string) string {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	labels := strings.Split(h, ".")
	switch len(labels) {
	case 1:
		return h + "." + ns + ".svc"
	case 2:
		return h + ".svc"
	}
	for i := 2; i < len(labels); i++ {
		if labels[i] == "svc" {
			return strings.Join(labels[:i+1], ".")
		}
	}
	return h
}
