// Package leader holds the backup operator's leader-election test: two
// operator replicas against one API server, exactly one reconciling.
package leader
