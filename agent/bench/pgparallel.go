package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"cairn.dev/agent/internal/testenv"
	"cairn.dev/agent/test/dataset"
)

// The PostgreSQL side of the parallel bench (issue 26): a multi-table
// database with secondary indexes, backed up and restored by the agent
// (one stream, single transaction; and in parts with CAIRN_PARALLELISM=N,
// restored into a database it creates) side by side with what a DBA runs by
// hand in parallel: pg_dump -Fd -j N to a local folder, and pg_restore -j
// N from a local custom-format file and from that folder (not one
// transaction: each table and index on its own). The agent's restore
// includes its download from S3; the peers read local files.

// pgParallelRow measures a ~mb MB database of parTables tables.
func (e *env) pgParallelRow(mb, runs, threads int) (row, error) {
	db := fmt.Sprintf("pgpar_%dmb", mb)
	fmt.Fprintf(os.Stderr, "bench: generating PostgreSQL %s (~%d MB in %d tables with secondary indexes)\n", db, mb, parTables)
	dbBytes, err := dataset.Postgres(e.pg, db, parTables, int64(mb)<<20)
	if err != nil {
		return row{}, err
	}
	pgEnv := []string{"CAIRN_ENGINE=postgres", "CAIRN_DB_HOST=127.0.0.1", "CAIRN_DB_PORT=" + strconv.Itoa(e.pg.Port),
		"CAIRN_DB_USER=" + e.pg.User, "CAIRN_DB_PASSWORD=" + e.pg.Password}
	dirOut := filepath.Join(e.tmp, "pgdump-dir")
	defer os.RemoveAll(dirOut)
	single := "agent backup → S3"
	dumpDir := fmt.Sprintf("pg_dump -Fd -Z0 -j %d → local dir", threads)
	par := fmt.Sprintf("agent backup parallelism %d → S3", threads)
	dumpDirGz := fmt.Sprintf("pg_dump -Fd -j %d (its default: gzip) → local dir", threads)
	cases := []benchCase{
		{name: onePass, run: func(int) (measurement, error) {
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s | zstd -q > %s", testenv.PGBinDir, db, e.out()), e.out())
		}},
		{name: resticPG, run: func(r int) (measurement, error) {
			return e.restic(e.pg.Env(), fmt.Sprintf("%s/pg_dump -d %s", testenv.PGBinDir, db), fmt.Sprintf("restic-%s-%d", db, r))
		}},
		{name: single, peer: onePass, run: func(r int) (measurement, error) {
			return e.agentBackup(append(pgEnv, "CAIRN_DB_NAME="+db), "s3", "fastest", "", fmt.Sprintf("bench/pgpar-%d", r))
		}},
		// Issue 26: ≥ 1.0× pg_dump -Fd -j N, ≥ 1.3× the agent in one
		// stream; peak RSS ≤ 64 MiB + the parts in flight.
		{name: par, peer: dumpDir, run: func(r int) (measurement, error) {
			return e.agentBackup(append(pgEnv, "CAIRN_DB_NAME="+db, contractParallelism(threads)), "s3", "fastest", "", fmt.Sprintf("bench/pgparts-%d", r))
		}, targets: targets{want: 1.0, also: []peerTarget{{dumpDirGz, 1.0}, {single, 1.3}}, rssMiB: partsRSS(threads)}},
		{name: dumpDir, run: func(int) (measurement, error) {
			os.RemoveAll(dirOut)
			m, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fd -Z0 -j %d -d %s -f %s", testenv.PGBinDir, threads, db, dirOut), "")
			m.outBytes = duBytes(dirOut)
			return m, err
		}},
		// pg_dump -Fd's default: each table's file compressed (gzip at
		// zlib's default level), the backup a DBA keeps.
		{name: dumpDirGz, run: func(int) (measurement, error) {
			os.RemoveAll(dirOut)
			m, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fd -j %d -d %s -f %s", testenv.PGBinDir, threads, db, dirOut), "")
			m.outBytes = duBytes(dirOut)
			return m, err
		}},
	}
	ms, err := measure(dbBytes, runs, cases)
	if err != nil {
		return row{}, err
	}

	// Restores: the agent's artifact from S3; the peers from local files.
	file := filepath.Join(e.tmp, "pgpar.dump")
	defer os.Remove(file)
	if _, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fc -Z0 -d %s -f %s", testenv.PGBinDir, db, file), ""); err != nil {
		return row{}, err
	}
	os.RemoveAll(dirOut)
	if _, err := e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_dump -Fd -Z0 -j %d -d %s -f %s", testenv.PGBinDir, threads, db, dirOut), ""); err != nil {
		return row{}, err
	}
	// The DBA's procedure with the backup in S3: download the compressed
	// dump (curl, SigV4), decompress it to a local file, pg_restore -j N
	// from it (pg_restore -j needs a file it can seek in).
	s3Object := "http://" + e.s3.Endpoint() + "/" + bucket + "/pgpar-peer/pgpar.dump.zst"
	curl := fmt.Sprintf("curl -sSf --aws-sigv4 aws:amz:us-east-1:s3 --user %s:%s -H \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"", accessKey, secretKey)
	downloaded := filepath.Join(e.tmp, "pgpar-downloaded.dump")
	defer os.Remove(downloaded)
	if _, err := e.shell(nil, fmt.Sprintf("zstd -q -1 -f %[1]s -o %[1]s.zst && %[2]s -T %[1]s.zst %[3]s && rm %[1]s.zst", file, curl, s3Object), ""); err != nil {
		return row{}, fmt.Errorf("upload the peer's dump with curl (apt-get install curl): %w", err)
	}
	s3Env := []string{"CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT=" + e.s3.Endpoint(), "CAIRN_S3_BUCKET=" + bucket, "CAIRN_S3_PREFIX=pgpar",
		"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey}
	job := "bench/restore-pgpar"
	if _, err := e.agent(append(append(append([]string{}, pgEnv...), s3Env...), "CAIRN_DB_NAME="+db, "CAIRN_BACKUPJOB="+job), "backup"); err != nil {
		return row{}, err
	}
	partsJob := "bench/restore-pgparts"
	if _, err := e.agent(append(append(append([]string{}, pgEnv...), s3Env...), "CAIRN_DB_NAME="+db, "CAIRN_BACKUPJOB="+partsJob, contractParallelism(threads)), "backup"); err != nil {
		return row{}, err
	}
	target := "pgpar_restore"
	fresh := e.pgFresh(target)
	restoreFile := fmt.Sprintf("pg_restore -j %d ← local file", threads)
	restoreDir := fmt.Sprintf("pg_restore -j %d ← local dir", threads)
	viaS3 := fmt.Sprintf("S3 → curl | zstd -d → file; pg_restore -j %d", threads)
	opts := "--exit-on-error --no-owner --no-privileges"
	rcases := []benchCase{
		{name: pgRestore, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_restore --single-transaction %s -d %s < %s", testenv.PGBinDir, opts, target, file), "")
		}},
		{name: "agent restore ← S3", run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.agent(append(append(append([]string{}, pgEnv...), s3Env...), "CAIRN_DB_NAME="+target, "CAIRN_BACKUPJOB="+job), "restore")
		}},
		// Issue 26: ≥ 1.0× pg_restore -j N including the download.
		{name: fmt.Sprintf("agent restore parallelism %d ← S3", threads), peer: viaS3, run: func(int) (measurement, error) {
			// Into a database the restore creates: the parallel path.
			if _, err := e.pg.SQL("postgres", "DROP DATABASE IF EXISTS "+target); err != nil {
				return measurement{}, err
			}
			return e.agent(append(append(append([]string{}, pgEnv...), s3Env...), "CAIRN_DB_NAME="+target, "CAIRN_BACKUPJOB="+partsJob, contractParallelism(threads)), "restore")
		}, targets: targets{want: 1.0}},
		{name: viaS3, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			os.Remove(downloaded)
			return e.shell(e.pg.Env(), fmt.Sprintf("%s %s | zstd -d -q -o %s && %s/pg_restore -j %d %s -d %s %s",
				curl, s3Object, downloaded, testenv.PGBinDir, threads, opts, target, downloaded), "")
		}},
		{name: restoreFile, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_restore -j %d %s -d %s %s", testenv.PGBinDir, threads, opts, target, file), "")
		}},
		{name: restoreDir, run: func(int) (measurement, error) {
			if err := fresh(); err != nil {
				return measurement{}, err
			}
			return e.shell(e.pg.Env(), fmt.Sprintf("%s/pg_restore -j %d %s -d %s %s", testenv.PGBinDir, threads, opts, target, dirOut), "")
		}},
	}
	rms, err := measure(dbBytes, runs, rcases)
	if err != nil {
		return row{}, err
	}
	if err := e.pgDrop(target, db); err != nil {
		return row{}, err
	}
	return row{engine: fmt.Sprintf("PostgreSQL %d tables", parTables), dbBytes: dbBytes, ms: append(ms, rms...)}, nil
}

// pgFresh returns a function that makes target a new, empty database.
func (e *env) pgFresh(target string) func() error {
	return func() error {
		_, err := e.pg.SQL("postgres", fmt.Sprintf("DROP DATABASE IF EXISTS %s; CREATE DATABASE %s;", target, target))
		return err
	}
}

// pgDrop drops a bench's restore target and its source database.
func (e *env) pgDrop(target, db string) error {
	for _, q := range []string{"DROP DATABASE IF EXISTS " + target, "DROP DATABASE " + db} {
		if _, err := e.pg.SQL("postgres", q); err != nil {
			return err
		}
	}
	return nil
}
