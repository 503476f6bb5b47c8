package webhook

import (
	"testing"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/testing/testenv"
)

func TestDefaulterFinalizer(t *testing.T) {
	testenv.CheckDefaulter(t, NewDefaulter(nil), func() *backupv1.BackupJob { return &backupv1.BackupJob{} },
		func(bj *backupv1.BackupJob) bool { return bj.Spec.TimeZone == backupv1.DefaultTimeZone })
}
