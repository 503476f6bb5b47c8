// Package contract is the one contract between the Cairn operators and the
// agent they run in Jobs: the commands and migration steps, the environment
// variables the operators render and the agent parses (env.go, with the
// table Vars that both sides are tested against), the exit codes the Jobs'
// podFailurePolicy matches, and the one JSON line every command reports as
// its termination message (at most 4096 bytes, the kubelet's limit) with
// the failure codes operators decide on instead of matching messages.
//
// It is its own module and depends on the standard library only, so the
// operators and libs import it without the agent's database drivers and
// S3 client in their module graph.
//
// Operators decode termination messages with Parse, ParseMigration and
// ParseCatalog. A successful backup or restore reports a Result:
//
//	{"artifact":"cairn/ns/job/ns_job_20260102T030405.123Z.pgdump.zst","size":1234,
//	 "checksum":"sha256:…","start":"2026-01-02T03:04:05.123Z","end":"…",
//	 "durationSeconds":1.5,"engine":"postgres"}
//
// A failed command reports a Failure: {"error":"backup: …"}, with a code
// when the operator acts on the kind of failure:
// {"error":"replication-status: …","code":"RetainedWALOverLimit"}; a
// refused server is named:
// {"error":"backup failed: unsupported server version: …","code":"UnsupportedServerVersion","server":{"engine":"postgres","version":"18.6"}}.
package contract
