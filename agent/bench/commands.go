package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"cairn.dev/agent/internal/testenv"
)

// The peers' configurations, as the report names them.
const (
	onePass = "pg_dump -Fc -Z0 | zstd"
	// The pipes followed by an fsync of the file and its folder (`sync
	// FILE DIR`), as the agent's PVC store does before it reports success:
	// the durable comparison, printed beside the peer.
	onePassSync = "pg_dump -Fc -Z0 | zstd + sync"
	myZstdSync  = "mysqldump | zstd + sync"
	resticPG    = "pg_dump | restic backup --stdin → S3"
	pgRestore   = "zstd -d | pg_restore"
	myZstd      = "mysqldump | zstd"
	resticMy    = "mysqldump | restic backup --stdin → S3"
	myRestore   = "zstd -d | mysql"
)

// levelSuffix names a zstd level in a configuration's name; the agent's
// default level (fastest) is not named.
func levelSuffix(level string) string {
	if level == "fastest" || level == "" {
		return ""
	}
	return " (zstd " + level + ")"
}

// inventorySuffix names a non-default CAIRN_INVENTORY.
func inventorySuffix(inv string) string {
	if inv == "" {
		return ""
	}
	return ", inventory " + inv
}

func (e *env) out() string { return filepath.Join(e.tmp, "baseline.out") }

// shell times a bash pipeline; the size of out (if set) is its output,
// removed afterwards.
func (e *env) shell(extraEnv []string, script, out string) (measurement, error) {
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), extraEnv...)
	start, busy := time.Now(), machineCPU()
	if b, err := cmd.CombinedOutput(); err != nil {
		return measurement{}, fmt.Errorf("%s: %w: %s", script, err, b)
	}
	m := measurement{elapsed: time.Since(start), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), busy: machineCPU() - busy}
	if out != "" {
		fi, err := os.Stat(out)
		if err != nil {
			return measurement{}, err
		}
		m.outBytes = fi.Size()
		os.Remove(out)
	}
	return m, nil
}

// restic times `dump | restic backup --stdin` into a new repository under
// prefix in the bench bucket (restic init is not timed: K8up's repository
// exists before a backup) and reports the bytes the repository stores.
func (e *env) restic(extraEnv []string, dump, prefix string) (measurement, error) {
	renv := append(append([]string{}, extraEnv...),
		"RESTIC_REPOSITORY=s3:http://"+e.s3.Endpoint()+"/"+bucket+"/"+prefix,
		"RESTIC_PASSWORD=bench-restic", "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey,
		"AWS_DEFAULT_REGION=us-east-1", "RESTIC_CACHE_DIR="+filepath.Join(e.tmp, "restic-cache"))
	defer os.RemoveAll(filepath.Join(e.tmp, "restic-cache"))
	if _, err := e.shell(renv, "restic init --repository-version 2 -q", ""); err != nil {
		return measurement{}, err
	}
	m, err := e.shell(renv, dump+" | restic backup -q --host bench --stdin --stdin-filename dump.sql", "")
	if err != nil {
		return measurement{}, err
	}
	dir := filepath.Join(e.s3.Root, bucket, prefix)
	m.outBytes = duBytes(dir)
	return m, os.RemoveAll(dir)
}

func duBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// agent runs one agent command to completion.
func (e *env) agent(env []string, cmd ...string) (measurement, error) {
	env = append(env, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+e.tmp)
	a := &testenv.Agent{Bin: e.bin, Env: env, Dir: e.tmp}
	busy := machineCPU()
	r := a.Run(nil, cmd...)
	busy = machineCPU() - busy
	if r.Code != 0 {
		return measurement{}, fmt.Errorf("agent %s failed: %s", cmd, r.Stderr)
	}
	// Where a parts restore's time went (its phase lines).
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(l, " seconds=") {
			fmt.Fprintln(os.Stderr, "bench:   agent:", l[strings.Index(l, "msg="):])
		}
	}
	return measurement{elapsed: r.Elapsed, cpu: r.CPU, rssKiB: r.PeakRSSKiB, busy: busy}, nil
}

func (e *env) agentBackup(env []string, kind, level, inv, job string) (measurement, error) {
	if inv != "" {
		env = append(env, "CAIRN_INVENTORY="+inv)
	}
	env = append(env, "CAIRN_BACKUPJOB="+job, "CAIRN_COMPRESSION="+level, "PATH="+testenv.PGBinDir+":"+os.Getenv("PATH"), "HOME="+e.tmp)
	pvcDir := filepath.Join(e.tmp, "pvc")
	switch kind {
	case "pvc":
		if err := os.MkdirAll(pvcDir, 0o755); err != nil {
			return measurement{}, err
		}
		defer os.RemoveAll(pvcDir)
		env = append(env, "CAIRN_STORE=pvc", "CAIRN_PVC_PATH="+pvcDir)
	case "s3":
		env = append(env, "CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT="+e.s3.Endpoint(), "CAIRN_S3_BUCKET="+bucket,
			"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey)
	}
	a := &testenv.Agent{Bin: e.bin, Env: env, Dir: e.tmp}
	busy := machineCPU()
	r := a.Run(nil, "backup")
	busy = machineCPU() - busy
	if r.Code != 0 {
		return measurement{}, fmt.Errorf("agent backup to %s failed: %s", kind, r.Stderr)
	}
	res, err := r.Result()
	if err != nil {
		return measurement{}, err
	}
	m := measurement{elapsed: r.Elapsed, cpu: r.CPU, outBytes: res.Size + res.PartsSize, rssKiB: r.PeakRSSKiB, busy: busy}
	if kind == "s3" {
		// What the bucket holds for the job (artifact and manifest), then
		// free the space with the agent itself.
		if n := duBytes(filepath.Join(e.s3.Root, bucket, "cairn")); n > 0 {
			m.outBytes = n
		}
		if d := a.Run(nil, "delete"); d.Code != 0 {
			return measurement{}, fmt.Errorf("agent delete: %s", d.Stderr)
		}
	}
	return m, nil
}

// s3Env is the agent's environment for the bench bucket.
func (e *env) s3Env() []string {
	return []string{"CAIRN_STORE=s3", "CAIRN_S3_ENDPOINT=" + e.s3.Endpoint(), "CAIRN_S3_BUCKET=" + bucket,
		"CAIRN_S3_INSECURE=true", "CAIRN_S3_REGION=us-east-1", "AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey}
}
