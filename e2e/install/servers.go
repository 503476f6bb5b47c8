package install

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"cairn.dev/agent/testservers"
)

// Credentials of the servers StartServers starts (test-only values).
const (
	PostgresUser     = "postgres"
	PostgresPassword = "cairn-e2e-pg"
	MariaDBUser      = "cairn"
	MariaDBPassword  = "cairn-e2e-maria"
	S3AccessKey      = "cairn-e2e"
	S3SecretKey      = "cairn-e2e-s3-secret"
	// Bucket exists on the S3 server from the start.
	Bucket = "cairn-backups"
)

// Servers are the real data servers of a platform with RealData: a private
// PostgreSQL 15, a private MariaDB and versitygw (S3), each in a temporary
// folder on a free loopback port, started by agent/testservers (as the
// agent's own tests start them). Pods reach them on 127.0.0.1 (the pod
// runner's containers use the host's network).
type Servers struct {
	Postgres *testservers.Postgres
	MariaDB  *testservers.MariaDB
	S3       *testservers.S3
}

// StartServers starts the three servers side by side and creates Bucket. On
// an error nothing is left running.
func StartServers(logf func(string, ...any)) (*Servers, error) {
	s := &Servers{}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); s.Postgres, errs[0] = testservers.StartPostgres(PostgresPassword) }()
	go func() {
		defer wg.Done()
		s.MariaDB, errs[1] = testservers.StartMariaDBWithBinlog(MariaDBUser, MariaDBPassword)
	}()
	go func() { defer wg.Done(); s.S3, errs[2] = testservers.StartS3("", S3AccessKey, S3SecretKey) }()
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		err = s.S3.MakeBucket(Bucket)
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("platform: starting the data servers: %w", err)
	}
	logf("servers up in %s: PostgreSQL 15 on 127.0.0.1:%d, MariaDB on 127.0.0.1:%d, S3 (versitygw) on %s with bucket %s",
		time.Since(start).Round(time.Millisecond), s.Postgres.Port, s.MariaDB.Port, s.S3.Endpoint(), Bucket)
	return s, nil
}

// Stop stops every server and removes its data.
func (s *Servers) Stop() {
	if s == nil {
		return
	}
	var wg sync.WaitGroup
	for _, stop := range []func(){s.Postgres.Stop, s.MariaDB.Stop, s.S3.Stop} {
		wg.Add(1)
		go func() { defer wg.Done(); stop() }()
	}
	wg.Wait()
}
