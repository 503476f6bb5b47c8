package pitr

// The temporary recovery server's configuration: written by Cairn, never
// read from the base (docs/security.md, "A restore runs nothing the store
// or the source wrote").

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The configuration files the base brings and the server would read: the
// server is started with config_file, hba_file and ident_file of Cairn's
// own, so postgresql.conf, pg_hba.conf, pg_ident.conf (and whatever they
// include: conf.d, include_dir) are never read; postgresql.auto.conf is
// always read from the data directory, so it is replaced by an empty one.
// recovery.conf makes PostgreSQL 12+ refuse to start; the signal files and
// the postmaster's files are the restore's to write.
var baseConfigFiles = []string{"postgresql.conf", "postgresql.auto.conf", "pg_hba.conf", "pg_ident.conf", "recovery.conf",
	"postmaster.pid", "postmaster.opts", "standby.signal", "recovery.signal", "backup_manifest"}

// ReplaySettings are the settings WAL replay depends on: PostgreSQL refuses
// to replay WAL of a primary that ran with higher values (they are
// recorded in pg_control), and a replica state (replication origins of a
// logical-replication subscriber, prepared transactions) needs room.
type ReplaySettings struct {
	MaxConnections, MaxWorkerProcesses, MaxWALSenders, MaxPreparedTransactions, MaxLocksPerTransaction int
	// MaxReplicationSlots (and on 18+ MaxActiveReplicationOrigins, which
	// then holds the origins) is not in pg_control: a generous default,
	// raised to fit the origins the base's checkpoint recorded.
	MaxReplicationSlots int
	// Major is the base's PostgreSQL major version (its PG_VERSION).
	Major int
}

// defaultReplay is what the temporary server runs with when pg_control asks
// for less.
var defaultReplay = ReplaySettings{MaxConnections: 20, MaxWorkerProcesses: 8, MaxLocksPerTransaction: 64, MaxReplicationSlots: 64}

var controlLine = regexp.MustCompile(`(?m)^(max_connections|max_worker_processes|max_wal_senders|max_prepared_xacts|max_locks_per_xact) setting:\s+(\d+)\s*$`)

// replaySettings reads the unpacked base's pg_control with pg_controldata
// (of the server's own bin folder) and its checkpointed replication
// origins, and returns each setting as max(what the base needs, the
// default).
func replaySettings(ctx context.Context, postgres, dataDir string) (ReplaySettings, error) {
	s := defaultReplay
	v, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return s, fmt.Errorf("the base has no PG_VERSION: %w", err)
	}
	if s.Major, err = strconv.Atoi(strings.TrimSpace(string(v))); err != nil || s.Major < 9 || s.Major > 99 {
		return s, fmt.Errorf("the base's PG_VERSION %.20q is not a PostgreSQL major version", v)
	}
	// pg_controldata of the server's own bin folder (a postgres on PATH
	// may be a link into it).
	if real, err := filepath.EvalSymlinks(postgres); err == nil {
		postgres = real
	}
	tool := filepath.Join(filepath.Dir(postgres), "pg_controldata")
	if _, err := os.Stat(tool); err != nil {
		if tool, err = PGTool("pg_controldata"); err != nil {
			return s, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, tool, "-D", dataDir)
	// English output (its labels are translated), and nothing of the
	// agent's environment.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "LANG=C", "TZ=UTC"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return s, fmt.Errorf("pg_controldata of the base: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	found := map[string]int{}
	for _, m := range controlLine.FindAllStringSubmatch(out.String(), -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil || n < 0 || n > 1<<20 {
			return s, fmt.Errorf("pg_controldata of the base: %s setting %q", m[1], m[2])
		}
		found[m[1]] = n
	}
	for _, k := range []struct {
		name string
		into *int
	}{{"max_connections", &s.MaxConnections}, {"max_worker_processes", &s.MaxWorkerProcesses}, {"max_wal_senders", &s.MaxWALSenders},
		{"max_prepared_xacts", &s.MaxPreparedTransactions}, {"max_locks_per_xact", &s.MaxLocksPerTransaction}} {
		n, ok := found[k.name]
		if !ok {
			return s, fmt.Errorf("pg_controldata of the base does not say its %s setting", k.name)
		}
		*k.into = max(*k.into, n)
	}
	// pg_logical/replorigin_checkpoint: a magic, one 16-byte record per
	// origin, a CRC.
	if fi, err := os.Lstat(filepath.Join(dataDir, "pg_logical", "replorigin_checkpoint")); err == nil && fi.Mode().IsRegular() {
		s.MaxReplicationSlots = max(s.MaxReplicationSlots, 2*int(min((fi.Size()-8)/16, 2048))+16)
	}
	return s, nil
}

// recoveryConf is the whole configuration of the temporary server: every
// setting that runs a program, loads a library or reaches out is set here
// (empty, off, or Cairn's own restore_command), and no file is included.
func recoveryConf(tmp, hba, ident, restoreCommand string, s ReplaySettings, target []string) []byte {
	set := [][2]string{
		{"listen_addresses", ""}, {"unix_socket_directories", tmp}, {"unix_socket_permissions", "0700"}, {"port", "5432"},
		{"hba_file", hba}, {"ident_file", ident}, {"ssl", "off"}, {"cluster_name", "cairn-recover"},
		// Nothing loaded, nothing run, nothing reached but Cairn's own.
		{"shared_preload_libraries", ""}, {"session_preload_libraries", ""}, {"local_preload_libraries", ""},
		{"dynamic_library_path", "$libdir"}, {"jit", "off"},
		{"archive_mode", "off"}, {"archive_command", ""}, {"archive_library", ""},
		{"archive_cleanup_command", ""}, {"recovery_end_command", ""}, {"restore_command", restoreCommand},
		{"primary_conninfo", ""}, {"primary_slot_name", ""}, {"hot_standby", "off"},
		// A subscription of the base never connects to its publisher.
		{"max_logical_replication_workers", "0"}, {"max_sync_workers_per_subscription", "0"},
		{"external_pid_file", ""},
		{"fsync", "off"}, {"synchronous_commit", "off"}, {"full_page_writes", "off"},
		{"shared_buffers", "64MB"}, {"wal_level", "replica"}, {"logging_collector", "off"}, {"log_destination", "stderr"},
		// Dynamic shared memory in the data directory, not /dev/shm (small
		// in a container).
		{"dynamic_shared_memory_type", "mmap"},
		{"max_connections", strconv.Itoa(s.MaxConnections)},
		{"max_worker_processes", strconv.Itoa(s.MaxWorkerProcesses)},
		{"max_wal_senders", strconv.Itoa(s.MaxWALSenders)},
		{"max_prepared_transactions", strconv.Itoa(s.MaxPreparedTransactions)},
		{"max_locks_per_transaction", strconv.Itoa(s.MaxLocksPerTransaction)},
		{"max_replication_slots", strconv.Itoa(s.MaxReplicationSlots)},
	}
	if s.Major >= 17 {
		// Login event triggers (17+) of the base would run at our
		// connections.
		set = append(set, [2]string{"event_triggers", "off"})
	}
	if s.Major >= 18 {
		set = append(set, [2]string{"max_active_replication_origins", strconv.Itoa(s.MaxReplicationSlots)})
	}
	if s.Major < 15 {
		// archive_library is 15+.
		for i, kv := range set {
			if kv[0] == "archive_library" {
				set = append(set[:i], set[i+1:]...)
				break
			}
		}
	}
	for i := 0; i+1 < len(target); i += 2 {
		set = append(set, [2]string{target[i], target[i+1]})
	}
	var b bytes.Buffer
	b.WriteString("# Written by the Cairn agent for a point-in-time restore; nothing of the base's configuration is read.\n")
	for _, kv := range set {
		fmt.Fprintf(&b, "%s = '%s'\n", kv[0], strings.ReplaceAll(strings.ReplaceAll(kv[1], `\`, `\\`), "'", "''"))
	}
	return b.Bytes()
}

// neutralise removes the base's configuration and state files from the
// unpacked data directory (a link among them is removed, never followed)
// and writes an empty postgresql.auto.conf and the recovery.signal.
func neutralise(dataDir string) error {
	root, err := os.OpenRoot(dataDir)
	if err != nil {
		return err
	}
	defer root.Close()
	// Tablespaces: PostgreSQL turns tablespace_map's lines into links
	// pg_tblspc/<oid> -> <any path> and replays into them. A base on
	// stdout (pg_basebackup --pgdata=-) holds the default tablespaces
	// only: either is a base Cairn did not take.
	// (pg_basebackup writes an empty one.)
	if fi, err := root.Lstat("tablespace_map"); err == nil {
		b, rerr := root.ReadFile("tablespace_map")
		if !fi.Mode().IsRegular() || rerr != nil || len(bytes.TrimSpace(b)) > 0 {
			return errors.New("the base holds a tablespace_map naming tablespaces: a Cairn base has none but the default ones (recovery would link and write where it names); restore refused")
		}
	}
	if entries, err := fs.ReadDir(root.FS(), "pg_tblspc"); err == nil && len(entries) > 0 {
		return fmt.Errorf("the base holds tablespace links (pg_tblspc/%s): a Cairn base has no tablespace but the default ones; restore refused", entries[0].Name())
	}
	for _, f := range baseConfigFiles {
		if err := root.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the base's %s: %w", f, err)
		}
	}
	for f, body := range map[string]string{
		"postgresql.auto.conf": "# Emptied by the Cairn agent: a restore runs none of the base's settings.\n",
		"recovery.signal":      "",
	} {
		out, err := root.OpenFile(f, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		if _, err := out.WriteString(body); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
	return nil
}
