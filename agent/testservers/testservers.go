// Package testservers starts, for tests outside the agent module (the e2e
// suite and the demo), the same real servers the agent's own data-path tests
// use: a private PostgreSQL 15, a private MariaDB and versitygw (a real S3
// server), each in a temporary folder on a free port of 127.0.0.1. It is a
// thin exported face of agent/internal/testenv, so there is one copy of how
// they start.
//
// A missing server binary is an error that says to run hack/agent-deps.sh
// (`make agent-deps`); callers fail on it, they never skip.
package testservers

import "cairn.dev/agent/internal/testenv"

// Hint says how to install the servers.
const Hint = testenv.Hint

// Postgres is a private PostgreSQL 15 server; SQL runs statements as its
// superuser (User, Password over TCP on 127.0.0.1:Port).
type Postgres = testenv.Postgres

// MariaDB is a private MariaDB server; SQL runs statements as root over its
// socket, the agent connects as User with Password on 127.0.0.1:Port.
type MariaDB = testenv.MariaDB

// S3 is versitygw serving each folder under Root as a bucket on Endpoint().
type S3 = testenv.S3

// StartPostgres initialises and starts a PostgreSQL 15 server whose
// superuser "postgres" has password.
func StartPostgres(password string) (*Postgres, error) { return testenv.StartPostgres(password) }

// StartMariaDB initialises and starts a MariaDB server with user (all
// privileges) and password.
func StartMariaDB(user, password string) (*MariaDB, error) {
	return testenv.StartMariaDB(user, password)
}

// StartMariaDBWithBinlog is StartMariaDB with the binary log on (ROW
// format, server id 1), as production servers run and as a point-in-time
// archiver reads it.
func StartMariaDBWithBinlog(user, password string) (*MariaDB, error) {
	return testenv.StartMariaDBWithBinlog(user, password)
}

// StartS3 starts versitygw serving root (a new temporary folder when root is
// empty) with one access key.
func StartS3(root, accessKey, secretKey string) (*S3, error) {
	return testenv.StartS3(root, accessKey, secretKey)
}

// FreePort returns a TCP port that was free a moment ago on 127.0.0.1 and
// on every address, drawn below the kernel's ephemeral range (so no
// outgoing connection takes it before the caller's server binds it).
func FreePort() (int, error) { return testenv.FreePort() }
