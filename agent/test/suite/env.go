// Package suite holds the agent's data-path tests, written once and run
// against each engine (the postgres and mysql test packages, each with its
// own server) and each store (a PVC folder and a versitygw bucket).
package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

// Test credentials: long and distinctive so that a leak is easy to find.
const (
	S3AccessKey = "cairn-test-access"
	S3SecretKey = "s3-SECRET-9f1c2e7a-do-not-print"
	DBPassword  = "db-PASSWORD-5b8d3c1f-do-not-print"
	Bucket      = "cairn-backups"
)

// DB is one engine's server as the tests use it.
type DB interface {
	// Engine is postgres or mysql.
	Engine() string
	// AgentEnv configures the agent for database db (password included).
	AgentEnv(db string) []string
	// Port is the server's TCP port on 127.0.0.1.
	Port() int
	// Create creates an empty database; Drop drops it.
	Create(db string) error
	Drop(db string) error
	// Seed creates db with tables of varied types and a few thousand rows.
	Seed(db string) error
	// SeedBig adds about mb megabytes of incompressible data to db.
	SeedBig(db string, mb int) error
	// Mutate changes db's data (so a restore of an older backup shows).
	Mutate(db string) error
	// Fingerprint returns row counts and per-table checksums computed by
	// SQL, plus schema facts (sequences, views, routines), one per line.
	Fingerprint(db string) (string, error)
	// SQL runs sql in database db and returns the rows, tab-separated.
	SQL(db, sql string) (string, error)
	// Stop stops the server.
	Stop()
}

// Env is what a test package sets up once in TestMain.
type Env struct {
	Agent *testenv.Agent
	DB    DB
	S3    *testenv.S3
	tmp   string
}

// Setup builds the agent and starts the database (with start) and an S3
// server. On error the returned Env is nil and the error says what to do;
// the tests then fail with it.
func Setup(start func() (DB, error)) (*Env, func(), error) {
	e := &Env{}
	var err error
	cleanup := func() {
		if e.DB != nil {
			e.DB.Stop()
		}
		e.S3.Stop()
		if e.tmp != "" {
			os.RemoveAll(e.tmp)
		}
	}
	if e.tmp, err = os.MkdirTemp("", "cairn-agent-test-"); err != nil {
		return nil, cleanup, err
	}
	bin, err := testenv.BuildAgent(e.tmp)
	if err != nil {
		return nil, cleanup, err
	}
	if e.DB, err = start(); err != nil {
		return nil, cleanup, err
	}
	if e.S3, err = testenv.StartS3("", S3AccessKey, S3SecretKey); err != nil {
		return nil, cleanup, err
	}
	if err := e.S3.MakeBucket(Bucket); err != nil {
		return nil, cleanup, fmt.Errorf("make bucket: %w", err)
	}
	e.Agent = &testenv.Agent{Bin: bin, Dir: e.tmp, Env: []string{
		"PATH=" + testenv.PGBinDir + ":" + os.Getenv("PATH"),
		"HOME=" + e.tmp,
		"CAIRN_LOG_LEVEL=debug",
	}}
	return e, cleanup, nil
}

// Require returns the environment or fails the test with the set-up error.
func Require(t *testing.T, e *Env, setupErr error) *Env {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("test environment: %v", setupErr)
	}
	if e == nil {
		t.Fatal("test environment was not set up")
	}
	return e
}

// Store is one artifact store as a test sees it.
type Store struct {
	Kind string
	// Env configures the agent for it (credentials included for S3).
	Env []string
	// Open is the agent's own implementation, to inspect and tamper with
	// what is stored.
	Open store.Store
	// S3 server, for s3 stores.
	S3 *testenv.S3
}

var unsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// NewStore makes a fresh store of kind for test t: a new folder, or a new
// prefix in the shared bucket.
func (e *Env) NewStore(t *testing.T, kind string) *Store {
	t.Helper()
	switch kind {
	case "pvc":
		dir := t.TempDir()
		st, err := store.NewPVC(dir)
		if err != nil {
			t.Fatal(err)
		}
		return &Store{Kind: kind, Env: []string{"CAIRN_STORE=pvc", "CAIRN_PVC_PATH=" + dir}, Open: st}
	case "s3":
		prefix := "runs/" + strings.Trim(unsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-") +
			"-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		return S3Store(t, e.S3, prefix)
	}
	t.Fatalf("unknown store kind %q", kind)
	return nil
}

// S3Store is a store on server s under prefix.
func S3Store(t *testing.T, s *testenv.S3, prefix string) *Store {
	t.Helper()
	cfg := store.S3Config{Endpoint: s.Endpoint(), Bucket: Bucket, Prefix: prefix, Insecure: true,
		AccessKey: S3AccessKey, SecretKey: S3SecretKey, MaxRetries: 1}
	st, err := store.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Store{Kind: "s3", S3: s, Open: st, Env: []string{
		"CAIRN_STORE=s3",
		"CAIRN_S3_ENDPOINT=" + s.Endpoint(),
		"CAIRN_S3_BUCKET=" + Bucket,
		"CAIRN_S3_PREFIX=" + prefix,
		"CAIRN_S3_INSECURE=true",
		"CAIRN_S3_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + S3AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + S3SecretKey,
	}}
}

// Read returns a stored object's bytes.
func (s *Store) Read(t *testing.T, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := s.Open.Get(ctx, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

// TryRead returns a stored object's bytes, or the error reading it.
func (s *Store) TryRead(key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := s.Open.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Write replaces a stored object.
func (s *Store) Write(t *testing.T, key string, b []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Open.Put(ctx, key, strings.NewReader(string(b))); err != nil {
		t.Fatalf("write %s: %v", key, err)
	}
}

// Keys lists the object keys under a job's folder.
func (s *Store) Keys(t *testing.T, job naming.Job) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := s.Open.List(ctx, job.Dir())
	if err != nil {
		t.Fatalf("list %s: %v", job.Dir(), err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

// IndexBytes returns the job's stored index — each manifest, then the
// legacy catalog, with their keys — or nil if there is none.
func (s *Store) IndexBytes(t *testing.T, job naming.Job) []byte {
	t.Helper()
	var out []byte
	keys := s.Keys(t, job)
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := catalog.ManifestName(job, k); ok || k == job.CatalogKey() {
			out = append(append(append(out, k...), '\n'), s.Read(t, k)...)
		}
	}
	return out
}

// Index returns the job's catalog as the agent reads it: manifests and the
// legacy catalog, for artifacts that are present.
func (s *Store) Index(t *testing.T, job naming.Job) *catalog.Catalog {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs, err := s.Open.List(ctx, job.Dir())
	if err != nil {
		t.Fatalf("list %s: %v", job.Dir(), err)
	}
	var entries []catalog.Entry
	var legacy *catalog.Catalog
	cobjs := make([]catalog.Object, len(objs))
	for i, o := range objs {
		cobjs[i] = catalog.Object{Key: o.Key, ModTime: o.ModTime}
		if _, ok := catalog.ManifestName(job, o.Key); ok {
			e, err := catalog.DecodeManifest(s.Read(t, o.Key), job, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, e)
		}
		if o.Key == job.CatalogKey() {
			if legacy, err = catalog.Decode(s.Read(t, o.Key), job); err != nil {
				t.Fatal(err)
			}
		}
	}
	return catalog.Index(job, entries, legacy, cobjs)
}

// KeyOf turns a result's artifact path back into a store key.
func (s *Store) KeyOf(t *testing.T, job naming.Job, artifact string) string {
	t.Helper()
	i := strings.LastIndex(artifact, "/")
	key := job.Key(artifact[i+1:])
	if s.Open.Path(key) != artifact {
		t.Fatalf("artifact path %q is not where the store keeps %s (%s)", artifact, key, s.Open.Path(key))
	}
	return key
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
