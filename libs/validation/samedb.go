package validation

import (
	"net"
	"strings"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Scope is where a database's host name is resolved: by a pod in Namespace
// of a cluster. Cluster is "" for this cluster, or any other name for
// another one (a MigrationJob's remote target).
type Scope struct {
	Namespace string
	Cluster   string
}

// SameDatabase is the admission-time guard every kind uses (RestoreJob's
// overwrite guard, MigrationJob's source ≠ target, ProtectionPlan's
// scratch database): it reports whether a (resolved in scope as) and b (in
// bs) name the same database, judged by spelling alone. It is fast and
// best-effort: it catches the same address spelt differently, never two
// addresses of one server (an IP and a name, a second Service, an
// ExternalName, a headless pod name). The agent asks the servers before it
// writes (agent/internal/identity); that check is authoritative.
//
// Equal are:
//   - engines: a and b must have the same engine (an empty one matches);
//   - ports: an empty port is the engine's default (5432, 3306);
//   - hosts: compared by CanonicalHost — case, a trailing dot and the
//     cluster domain do not matter, a Service name is completed with the
//     namespace it is resolved in ("db" in shop = "db.shop" =
//     "db.shop.svc" = "db.shop.svc.cluster.local"), IP addresses by value
//     and every loopback spelling (localhost, 127.0.0.1, ::1) is one host.
//     A name that only resolves inside a cluster (a Service name, a
//     private or loopback address) never matches a name of another
//     cluster;
//   - database names: PostgreSQL's exactly (the agent connects to the name
//     as given; "Orders" and "orders" are two databases), MySQL's
//     case-insensitively (a server with lower_case_table_names ≠ 0 folds
//     them: when in doubt, the same).
func SameDatabase(a cairnv1.DatabaseRef, as Scope, b cairnv1.DatabaseRef, bs Scope) bool {
	engine := a.Engine
	switch {
	case engine == "":
		engine = b.Engine
	case b.Engine != "" && b.Engine != engine:
		return false
	}
	if port(a.Port, engine) != port(b.Port, engine) {
		return false
	}
	if engine == cairnv1.MySQLEngine {
		if !strings.EqualFold(a.Database, b.Database) {
			return false
		}
	} else if a.Database != b.Database {
		return false
	}
	ha, la := CanonicalHost(a.Host, as.Namespace)
	hb, lb := CanonicalHost(b.Host, bs.Namespace)
	if as.Cluster != bs.Cluster && (la || lb) {
		return false
	}
	return ha == hb
}

func port(p int32, engine cairnv1.DatabaseEngine) int32 {
	if p != 0 {
		return p
	}
	return cairnv1.DefaultPort(engine)
}

// CanonicalHost names host as a pod in namespace ns resolves it: lowercase,
// without a trailing dot or the cluster domain; a one-label name is a
// Service in ns ("db" → "db.ns.svc"), a two-label name a Service in the
// named namespace ("db.shop" → "db.shop.svc"), a name with a "svc" label
// after its second is cut there ("db.shop.svc.cluster.local" →
// "db.shop.svc"); an IP address is written in its canonical form and every
// loopback address or name is "localhost". clusterLocal says the name
// means something only inside its cluster (a Service, a private or
// loopback address).
func CanonicalHost(host, ns string) (canonical string, clusterLocal bool) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsLoopback() || ip.IsUnspecified() {
			return "localhost", true
		}
		return ip.String(), ip.IsPrivate() || ip.IsLinkLocalUnicast()
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || h == "localhost.localdomain" {
		return "localhost", true
	}
	labels := strings.Split(h, ".")
	switch len(labels) {
	case 1:
		return h + "." + ns + ".svc", true
	case 2:
		return h + ".svc", true
	}
	for i := 2; i < len(labels); i++ {
		if labels[i] == "svc" {
			return strings.Join(labels[:i+1], "."), true
		}
	}
	return h, false
}
