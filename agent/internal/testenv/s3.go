package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 is a versitygw server with the posix backend: each folder under Root
// is a bucket.
type S3 struct {
	Root      string
	Port      int
	AccessKey string
	SecretKey string
	bin       string
	srv       *server
	ownsRoot  bool
	logDir    string
	// VersioningDir, when set before Start, enables bucket versioning
	// (and so S3 Object Lock) with versions kept there.
	VersioningDir string
}

// Endpoint is host:port (plain http).
func (s *S3) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// StartS3Versioned starts versitygw with bucket versioning, so buckets can
// be made with S3 Object Lock; versions are kept under versions.
func StartS3Versioned(root, versions, accessKey, secretKey string) (*S3, error) {
	bin, err := LookTool("versitygw")
	if err != nil {
		return nil, err
	}
	s := &S3{Root: root, AccessKey: accessKey, SecretKey: secretKey, bin: bin, VersioningDir: versions}
	if s.logDir, err = os.MkdirTemp("", "cairn-s3-log-"); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// StartS3 starts versitygw on a free port serving root (a new temporary
// folder when root is empty).
func StartS3(root, accessKey, secretKey string) (*S3, error) {
	bin, err := LookTool("versitygw")
	if err != nil {
		return nil, err
	}
	s := &S3{Root: root, AccessKey: accessKey, SecretKey: secretKey, bin: bin}
	if s.logDir, err = os.MkdirTemp("", "cairn-s3-log-"); err != nil {
		return nil, err
	}
	if root == "" {
		if s.Root, err = os.MkdirTemp("", "cairn-s3-"); err != nil {
			return nil, err
		}
		s.ownsRoot = true
	}
	if err := s.Start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Start (re)starts the server on a new free port.
func (s *S3) Start() error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := FreePort()
		if err != nil {
			return err
		}
		args := []string{"--port", "127.0.0.1:" + strconv.Itoa(port), "posix"}
		if s.VersioningDir != "" {
			args = append(args, "--versioning-dir", s.VersioningDir)
		}
		cmd := exec.Command(s.bin, append(args, s.Root)...)
		cmd.Env = []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey, "PATH=/usr/bin:/bin",
			"TMPDIR=" + s.logDir}
		srv, err := startServer("versitygw", filepath.Join(s.logDir, "versitygw.log"), cmd)
		if err != nil {
			return err
		}
		s.srv, s.Port = srv, port
		lastErr = Poll(30*time.Second, 50*time.Millisecond, func() error {
			if err := srv.running(); err != nil {
				return nil
			}
			c, err := net.DialTimeout("tcp", s.Endpoint(), time.Second)
			if err != nil {
				return err
			}
			c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = s.Client().ListBuckets(ctx)
			return err
		})
		if lastErr == nil {
			if lastErr = srv.running(); lastErr == nil {
				return nil
			}
		}
		srv.stop(syscall.SIGKILL, 5*time.Second)
	}
	return fmt.Errorf("versitygw did not start: %w", lastErr)
}

// Client is a minio client for the server, for test set-up and inspection.
func (s *S3) Client() *minio.Client {
	c, err := minio.New(s.Endpoint(), &minio.Options{
		Creds:      credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:     false,
		MaxRetries: 1,
	})
	if err != nil {
		panic(err) // only on a malformed endpoint
	}
	return c
}

// MakeBucket creates a bucket.
func (s *S3) MakeBucket(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Client().MakeBucket(ctx, name, minio.MakeBucketOptions{})
}

// Halt stops the server but keeps its data (Start brings it back).
func (s *S3) Halt() { s.srv.stop(syscall.SIGTERM, 10*time.Second) }

// Stop stops the server and removes its data if StartS3 created the folder.
func (s *S3) Stop() {
	if s == nil {
		return
	}
	s.srv.stop(syscall.SIGTERM, 10*time.Second)
	if s.ownsRoot && s.Root != "" {
		os.RemoveAll(s.Root)
	}
	if s.logDir != "" {
		os.RemoveAll(s.logDir)
	}
}
