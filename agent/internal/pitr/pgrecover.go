package pitr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"cairn.dev/agent/internal/crypt"
	"cairn.dev/agent/internal/engine"
	"cairn.dev/agent/internal/store"
)

// Recovery brings a PostgreSQL physical base forward in a temporary server
// inside the restore's own pod: the base is unpacked into a private folder
// under the temporary directory, the server started on a Unix socket only,
// with restore_command fetching the archived segments from the store
// through the agent (agent wal-fetch, served by this process: the
// temporary server never sees the store's credentials), and a recovery
// target. Once promoted, its database is dumped and restored into the
// target like every restore.
type Recovery struct {
	st    store.Store
	dir   string
	ids   *crypt.Identities
	chain []Segment
	until time.Time
	// immediate: recover only to the base's consistent point (a plain
	// restore of a base, no recovery target).
	immediate bool
	reached   time.Time
	log       *slog.Logger

	Tmp     string // the private folder: data/, the socket, the log
	DataDir string
	uid     int
	gid     int
	asUser  bool
	srv     *exec.Cmd
	srvDone chan error
	srvLog  *os.File
	ln      net.Listener
	wg      sync.WaitGroup
	// User is the role the base was taken as; Superuser the cluster's
	// bootstrap superuser, read once the server accepts connections.
	User      string
	Superuser string
	fetched   []string
	mu        sync.Mutex
}

// PrepareRecovery finds the whole chain of segments from the base's
// segment baseFile up to until (zero with latest: everything archived) and
// reads every one of them, checked against its checksum (and decrypted
// with ids when encrypted) — before anything is written anywhere: a gap, an
// unreadable or corrupt segment, an encrypted one ids cannot decrypt, or a
// time outside the window is refused here. immediate (a plain restore of a
// base) needs no segment: the base carries the WAL to its consistent
// point.
func PrepareRecovery(ctx context.Context, st store.Store, dir, baseFile string, until time.Time, immediate bool, ids *crypt.Identities, log *slog.Logger) (*Recovery, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recovery{st: st, dir: dir, ids: ids, until: until, immediate: immediate, log: log}
	if immediate {
		return r, nil
	}
	ix, err := LoadIndex(ctx, st, dir)
	if err != nil {
		return nil, err
	}
	if r.chain, err = ix.Chain(baseFile, until); err != nil {
		return nil, err
	}
	if err := CheckKeys(st, dir, r.chain, ids); err != nil {
		return nil, err
	}
	for _, s := range r.chain {
		if err := verify(ctx, st, dir, s, ids); err != nil {
			return nil, err
		}
	}
	r.reached = ix.coversThrough(r.chain[len(r.chain)-1])
	if !until.IsZero() {
		r.reached = until.UTC()
	}
	return r, nil
}

// verify reads segment s whole and checks it against its record (an
// encrypted one decrypted whole: every chunk authenticates).
func verify(ctx context.Context, st store.Store, dir string, s Segment, ids *crypt.Identities) error {
	f, err := os.CreateTemp("", "cairn-wal-check-")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	return fetch(ctx, st, dir, s, name, ids)
}

// Segments are the segments the recovery may read, in order.
func (r *Recovery) Segments() []string {
	out := make([]string, len(r.chain))
	for i, s := range r.chain {
		out[i] = s.File
	}
	return out
}

// Reached is the recovery point: the target time, or for latest the newest
// second the chain covers; zero for a recovery to the base's own
// consistent point.
func (r *Recovery) Reached() time.Time { return r.reached }

// Fetched lists the segments the temporary server asked for and got.
func (r *Recovery) Fetched() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.fetched...)
}

// Unpack makes the private folder and returns a writer-side function for
// the base's tar stream: it unpacks into the data directory.
func (r *Recovery) Unpack(ctx context.Context, tarStream io.Reader) error {
	var err error
	if r.Tmp == "" {
		if r.Tmp, err = os.MkdirTemp("", "cairn-recover-"); err != nil {
			return err
		}
	}
	r.DataDir = filepath.Join(r.Tmp, "data")
	if err := os.Mkdir(r.DataDir, 0o700); err != nil {
		return err
	}
	return untar(tarStream, r.DataDir)
}

// Start configures the unpacked base for recovery and starts the
// temporary server; it returns once the server has promoted (the recovery
// target, or the end of the archived WAL, reached) and accepts
// connections.
func (r *Recovery) Start(ctx context.Context, agentBin string) error {
	postgres, err := PGTool("postgres")
	if err != nil {
		return err
	}
	if err := r.runAs(); err != nil {
		return err
	}
	// restore_command: this agent, as a client of the socket this process
	// serves. Run as root (tests), the server runs as another user, who
	// gets its own copy of the agent.
	if r.asUser {
		own := filepath.Join(r.Tmp, "agent")
		if err := copyFile(agentBin, own, 0o755); err != nil {
			return err
		}
		agentBin = own
	}
	sock := filepath.Join(r.Tmp, "wal-fetch.sock")
	if r.ln, err = net.Listen("unix", sock); err != nil {
		return err
	}
	os.Chmod(sock, 0o777)
	r.wg.Add(1)
	go r.serve(ctx)
	// The base's own configuration is never read (pgconf.go): the server
	// starts on a file Cairn writes, its settings for WAL replay taken
	// from the base's pg_control.
	if err := neutralise(r.DataDir); err != nil {
		return err
	}
	settings, err := replaySettings(ctx, postgres, r.DataDir)
	if err != nil {
		return err
	}
	r.log.Info("the temporary server's settings for replay", "maxConnections", settings.MaxConnections,
		"maxWorkerProcesses", settings.MaxWorkerProcesses, "maxWALSenders", settings.MaxWALSenders,
		"maxPreparedTransactions", settings.MaxPreparedTransactions, "maxLocksPerTransaction", settings.MaxLocksPerTransaction,
		"maxReplicationSlots", settings.MaxReplicationSlots, "major", settings.Major)
	hba := filepath.Join(r.Tmp, "pg_hba.conf")
	ident := filepath.Join(r.Tmp, "pg_ident.conf")
	conf := filepath.Join(r.Tmp, "postgresql.conf")
	var target []string
	switch {
	case r.immediate:
		target = []string{"recovery_target", "immediate", "recovery_target_action", "promote"}
	case !r.until.IsZero():
		target = []string{"recovery_target_time", r.until.UTC().Format("2006-01-02 15:04:05.999999+00"),
			"recovery_target_action", "promote", "recovery_target_inclusive", "false"}
	}
	restoreCommand := quoteShell(agentBin) + " wal-fetch " + quoteShell(sock) + " %f %p"
	for f, body := range map[string][]byte{
		hba:   []byte("local all all trust\n"),
		ident: nil,
		conf:  recoveryConf(r.Tmp, hba, ident, restoreCommand, settings, target),
	} {
		if err := os.WriteFile(f, body, 0o600); err != nil {
			return err
		}
	}
	if r.asUser {
		if err := chownTree(r.Tmp, r.uid, r.gid); err != nil {
			return err
		}
	}
	args := []string{"-D", r.DataDir, "-c", "config_file=" + conf}
	err = r.start(ctx, postgres, args)
	if err != nil && !r.until.IsZero() && strings.Contains(r.logTail(), "recovery ended before configured recovery target was reached") {
		// No transaction in the archived WAL ended after the target: the
		// whole chain (it covers the target) is the state at the target.
		// Start again without a target, from where recovery stopped.
		r.log.Info("no transaction after the recovery target in the archive: recovering to the end of the chain, which covers it", "target", r.until)
		if err := os.WriteFile(conf, recoveryConf(r.Tmp, hba, ident, restoreCommand, settings, nil), 0o600); err != nil {
			return err
		}
		root, err := os.OpenRoot(r.DataDir)
		if err != nil {
			return err
		}
		root.Remove("recovery.signal")
		f, err := root.OpenFile("recovery.signal", os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		root.Close()
		if err != nil {
			return err
		}
		if r.asUser {
			f.Chown(r.uid, r.gid)
		}
		f.Close()
		return r.start(ctx, postgres, args)
	}
	return err
}

// start runs the server with args and waits until it accepts connections
// out of recovery, or exits.
func (r *Recovery) start(ctx context.Context, postgres string, args []string) error {
	logPath := filepath.Join(r.Tmp, "server.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r.srvLog = lf
	cmd := exec.Command(postgres, args...)
	cmd.Dir = r.Tmp
	cmd.Stdout, cmd.Stderr = lf, lf
	// The server's environment: no credentials of the agent's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TZ=UTC", "HOME=" + r.Tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if r.asUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("starting the temporary PostgreSQL server: %w", err)
	}
	r.srv = cmd
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	r.srvDone = done
	var ready time.Time
	for {
		select {
		case err := <-done:
			r.srv = nil
			lf.Close()
			return fmt.Errorf("the temporary PostgreSQL server stopped during recovery (%v): %s", err, r.logTail())
		case <-ctx.Done():
			r.Stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		ok, err := r.promoted(ctx)
		if ok {
			return nil
		}
		// Out of recovery and accepting connections (the postmaster says
		// so), yet no session of ours works: the base's roles cannot log
		// in (dropped, NOLOGIN). Said, not waited on until the deadline.
		if !r.postmasterReady() {
			continue
		}
		if ready.IsZero() {
			ready = time.Now()
		}
		if time.Since(ready) > PromoteGrace {
			r.Stop()
			return fmt.Errorf("the temporary PostgreSQL server accepts connections, but none as the base's role %q or postgres for %s: %v", r.User, PromoteGrace, err)
		}
	}
}

// PromoteGrace is how long the temporary server may accept connections
// while none of the agent's succeeds, before the recovery is given up.
var PromoteGrace = time.Minute

// postmasterReady: the data directory's postmaster.pid says "ready" (its
// eighth line, PostgreSQL 10+): the server accepts connections.
func (r *Recovery) postmasterReady() bool {
	b, err := os.ReadFile(filepath.Join(r.DataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
}

// promoted: the server accepts connections and is out of recovery; else
// why not.
func (r *Recovery) promoted(ctx context.Context) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The base's own role, else the usual bootstrap superuser's name (the
	// role may have been dropped after the base).
	var c *pgx.Conn
	var err error
	for _, role := range []string{r.User, "postgres"} {
		if role == "" {
			continue
		}
		if c, err = r.Connect(cctx, role, "postgres"); err == nil {
			break
		}
	}
	if c == nil {
		return false, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	var inRecovery bool
	var su string
	if err := c.QueryRow(cctx, "SELECT pg_is_in_recovery(), (SELECT rolname FROM pg_roles WHERE oid = 10)").Scan(&inRecovery, &su); err != nil || inRecovery {
		return false, err
	}
	r.Superuser = su
	return true, nil
}

// Conn is the temporary server's address for role. A client of the
// temporary server sends SessionOptions (PGOPTIONS for a tool).
func (r *Recovery) Conn(role string) engine.Conn {
	return engine.Conn{Host: r.Tmp, Port: 5432, User: role}
}

// SessionOptions are the startup options every session on the temporary
// server is opened with: the base's catalog carries per-role and
// per-database settings (ALTER ROLE/DATABASE … SET), which PostgreSQL
// applies at connection — session_preload_libraries among them, a library
// it loads into the session, which a path relative to the data directory
// (a file the base brings) would make native code of the base's. A
// client's startup options take precedence over them.
const SessionOptions = "-c session_preload_libraries= -c local_preload_libraries="

// Connect opens a session on the temporary server as role, with
// SessionOptions.
func (r *Recovery) Connect(ctx context.Context, role, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("host=" + engine.QuoteConninfo(r.Tmp) + " port=5432 user=" + engine.QuoteConninfo(role) +
		" dbname=" + engine.QuoteConninfo(db) + " connect_timeout=15 application_name=cairn-agent")
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["options"] = SessionOptions
	return pgx.ConnectConfig(ctx, cfg)
}

func (r *Recovery) logTail() string {
	b, _ := os.ReadFile(filepath.Join(r.Tmp, "server.log"))
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "FATAL") || strings.Contains(l, "PANIC") || strings.Contains(l, "recovery") || strings.Contains(l, "ERROR") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	if len(keep) > 6 {
		keep = keep[len(keep)-6:]
	}
	return strings.Join(keep, "; ")
}

// Close stops the server and removes the private folder.
func (r *Recovery) Close() {
	r.Stop()
	if r.ln != nil {
		r.ln.Close()
		r.wg.Wait()
	}
	if r.Tmp != "" {
		os.RemoveAll(r.Tmp)
	}
}

// Stop stops the temporary server (fast shutdown, then kill).
func (r *Recovery) Stop() {
	if r.srv == nil {
		return
	}
	r.srv.Process.Signal(syscall.SIGINT)
	select {
	case <-r.srvDone:
	case <-time.After(30 * time.Second):
		syscall.Kill(-r.srv.Process.Pid, syscall.SIGKILL)
		<-r.srvDone
	}
	r.srv = nil
	if r.srvLog != nil {
		r.srvLog.Close()
	}
}

// runAs decides who runs the server: PostgreSQL refuses root, so an agent
// run as root (tests; never in its pod, which runs as a non-root user)
// runs it as the postgres user, or nobody.
func (r *Recovery) runAs() error {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		r.uid, _ = strconv.Atoi(u.Uid)
		r.gid, _ = strconv.Atoi(u.Gid)
		r.asUser = true
		return nil
	}
	return errors.New("running as root, and neither a postgres nor a nobody user exists to run the temporary server as")
}

func quoteShell(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func chownTree(root string, uid, gid int) error {
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
