package main

// The point-in-time bench's restores (pitr.go): to a time, and plain.

import (
	"fmt"
	"os"
	"time"

	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/testenv"
)

// restores restores to a time near the load's end (the base and the
// archive), then a plain logical backup of the source (the same data and
// then some) by the agent without a time, and reports both.
func (p *pitrEnv) restores(job naming.Job, agentEnv []string, arch *archiveRun, before commit, commits []commit, rate, bytesPerTx float64) ([]restoreRow, error) {
	// The last whole second at least 1 s before the last commit: commits
	// follow it, so the recovery stops at a transaction after it.
	target := commits[len(commits)-1].at.Add(-time.Second).Truncate(time.Second)
	want := 0
	var at commit
	for _, c := range commits {
		if c.at.Before(target) {
			want++
			if c.seg > at.seg || c.seg == at.seg && c.pos > at.pos {
				at = c
			}
		}
	}
	pitrDB, plainDB := "pitr_at", "pitr_plain"
	fmt.Fprintf(os.Stderr, "bench: pitr %s: restore to %s\n", p.engine, target.UTC().Format(time.RFC3339))
	a := &testenv.Agent{Bin: p.e.bin, Env: append(agentEnv, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+p.e.tmp), Dir: p.e.tmp}
	r := a.Run([]string{"CAIRN_DB_NAME=" + pitrDB, "CAIRN_RECOVERY_TARGET=" + target.UTC().Format(time.RFC3339)}, "restore")
	if r.Code != 0 {
		return nil, fmt.Errorf("agent restore to %s failed: %s", target.UTC().Format(time.RFC3339), r.Stderr)
	}
	pr := restoreRow{engine: p.name(), config: "agent restore to a time ← S3 (base + log)", total: r.Elapsed, wantTxs: want, source: rate,
		logMB: float64(p.logBytes(arch, before, at)) / 1e6, dbMB: p.dbMB(p.db)}
	marks := logMarks(r.Stderr)
	if p.engine == "postgres" {
		// Unpack, then the temporary server's recovery (WAL fetched and
		// replayed to the target, promoted), then the copy into the target.
		pr.pre = marks["unpacking the base into a temporary data directory"].Sub(marks["verifying artifact"])
		pr.base = marks["recovering in a temporary server"].Sub(marks["unpacking the base into a temporary data directory"])
		pr.replay = marks["recovered"].Sub(marks["recovering in a temporary server"])
		pr.post = marks["restore finished"].Sub(marks["recovered"])
	} else {
		// The base's dump restored, then the binary log replayed.
		pr.pre = marks["restore started"].Sub(marks["verifying artifact"])
		pr.base = marks["replaying the binary log"].Sub(marks["restore started"])
		pr.replay = marks["restore finished"].Sub(marks["replaying the binary log"])
	}
	var err error
	if pr.txs, err = p.count(pitrDB); err != nil {
		return nil, err
	}
	if p.engine == "postgres" {
		// The WAL to the target: the load's WAL per transaction × the
		// transactions replayed.
		pr.logMB = bytesPerTx * float64(pr.txs) / 1e6
	}
	// The plain restore: a logical backup of the source now (the load's
	// end), restored by the agent.
	plain := naming.Job{Namespace: job.Namespace, Name: job.Name + "-plain"}
	plainEnv := append(append(append([]string{}, p.agent...), p.e.s3Env()...), "CAIRN_BACKUPJOB="+plain.String())
	fmt.Fprintf(os.Stderr, "bench: pitr %s: plain backup and restore\n", p.engine)
	if _, err := p.e.agent(append(plainEnv, "CAIRN_DB_NAME="+p.db), "backup"); err != nil {
		return nil, err
	}
	m, err := p.e.agent(append(plainEnv, "CAIRN_DB_NAME="+plainDB), "restore")
	if err != nil {
		return nil, err
	}
	pl := restoreRow{engine: p.name(), config: "agent restore (plain dump) ← S3", total: m.elapsed, wantTxs: len(commits), source: rate, dbMB: p.dbMB(p.db)}
	if pl.txs, err = p.count(plainDB); err != nil {
		return nil, err
	}
	for _, db := range []string{pitrDB, plainDB} {
		if p.engine == "postgres" {
			p.pg.SQL("postgres", "DROP DATABASE "+db)
		} else {
			p.my.SQL("", "DROP DATABASE "+db)
		}
	}
	return []restoreRow{pr, pl}, nil
}
