package controller

import (
	"fmt"
	"strconv"
	"strings"

	"cairn.dev/agent/contract"
	migrationv1 "cairn.dev/apis/migration/v1"
)

// differingTables names the tables of v that differ (a Continuous
// verification's tables still catching up are not among them), with
// their counts.
func differingTables(v *migrationv1.Verification) []string {
	var bad []string
	for _, it := range v.Items {
		if it.Match || it.State == contract.StateCatchingUp {
			continue
		}
		s := fmt.Sprintf("%s (%s: source %d rows, target %d", it.Table, it.Reason, it.SourceRows, it.TargetRows)
		if it.Rechecks > 0 {
			s += fmt.Sprintf("; still different after %d re-checks", it.Rechecks)
			if it.Rows > 0 {
				s += fmt.Sprintf(", %d rows", it.Rows)
			}
			s += ", unchanged on the source meanwhile"
		}
		bad = append(bad, s+")")
	}
	return bad
}

// recordExactCheck records the exact comparison a Continuous cutover's
// replication-stop made once the target had applied every change written
// before the stop; a difference is an error: the step fails, nothing is
// switched, and the abort drops the replication objects and undoes the
// read-only.
func recordExactCheck(mj *migrationv1.MigrationJob, res *contract.MigrationResult) error {
	if res == nil || res.Verification == nil {
		return nil
	}
	v := verificationStatus(res.Verification)
	v.Summary += atCutover
	mj.Status.Verification = v
	if v.Mismatched == 0 {
		return nil
	}
	return fmt.Errorf("the target differs from the source after it applied every change written before the writes stopped: %d of %d table(s): %s; nothing was switched",
		v.Mismatched, v.Tables, strings.Join(differingTables(v), ", "))
}

// lagSeconds prints a replay lag in seconds with milliseconds.
func lagSeconds(s float64) string {
	if s <= 0 {
		return "0"
	}
	return strconv.FormatFloat(s, 'f', 3, 64)
}
