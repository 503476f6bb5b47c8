package v1

// Default ports by engine: a DatabaseRef without a port uses its engine's.
// The CRDs cannot express a default that depends on another field; each
// operator's deploy base installs a MutatingAdmissionPolicy (run by the API
// server, no operator needed) that fills spec.…port from these values, and the
// agent falls back to them when no port reaches it.
const (
	DefaultPostgresPort int32 = 5432
	DefaultMySQLPort    int32 = 3306
)

// DefaultPort is engine's usual port, or 0 for an unknown engine.
func DefaultPort(engine DatabaseEngine) int32 {
	switch engine {
	case PostgresEngine:
		return DefaultPostgresPort
	case MySQLEngine:
		return DefaultMySQLPort
	}
	return 0
}

// SetDefaults fills the port of a DatabaseRef that has none with its engine's
// (left empty for an unknown engine, which validation rejects).
func (d *DatabaseRef) SetDefaults() {
	if d.Port == 0 {
		d.Port = DefaultPort(d.Engine)
	}
}
