package controller

// BackupJobAsCreated is backupJobAsCreated, for the tests of package
// controller_test.
var BackupJobAsCreated = backupJobAsCreated
