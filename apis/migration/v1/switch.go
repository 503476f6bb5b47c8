package v1

// spec.cutover.switchSecret is opt-in on the Secret's side: the migration
// operator patches only a Secret carrying SwitchableLabel with the value
// SwitchableValue, and of it only the keys SwitchKeys. The webhook refuses
// a MigrationJob naming a Secret without the label, the controller checks
// again before the switch, and a ValidatingAdmissionPolicy bound to the
// operator's ServiceAccount refuses any other write to a Secret.
const (
	// SwitchableLabel on a Secret allows MigrationJobs to switch it.
	SwitchableLabel = "migration.cairn.dev/switchable"
	// SwitchableValue is the only value of SwitchableLabel that allows it.
	SwitchableValue = "true"

	// SwitchHostKey, SwitchPortKey and SwitchDatabaseKey are the keys the
	// cutover writes: the target's host, port and database.
	SwitchHostKey     = "host"
	SwitchPortKey     = "port"
	SwitchDatabaseKey = "database"
)

// SwitchSecretNotSwitchableReason: spec.cutover.switchSecret names a
// Secret without SwitchableLabel="true"; the cutover does not write it.
const SwitchSecretNotSwitchableReason = "SwitchSecretNotSwitchable"

// SwitchKeys are the only keys of a switchSecret the operator may write.
var SwitchKeys = []string{SwitchHostKey, SwitchPortKey, SwitchDatabaseKey}
