package postgres_test

import (
	"testing"

	"cairn.dev/agent/test/suite"
)

// Issue 22 §1: the servers, not the spelling of an address, decide whether
// a target is the source.

func TestMigrateIntoSourceRefused(t *testing.T) { suite.MigrateIntoSourceRefused(t, e(t)) }

func TestRestoreOverSourceRefused(t *testing.T) {
	for _, kind := range suite.Stores {
		t.Run(kind, func(t *testing.T) { suite.RestoreOverSourceRefused(t, e(t), kind) })
	}
}
