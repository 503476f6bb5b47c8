package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 uses minio-go rather than the AWS SDK: one module (the AWS SDK v2 is a
// dozen) built for S3-compatible servers (MinIO, Ceph RGW, versitygw, …) as
// well as AWS, path-style addressing chosen automatically for non-AWS
// endpoints, and a streaming multipart upload of unknown length with one
// fixed part buffer, which is what keeps the agent's memory flat.

// DefaultPartSize is the multipart part size: the one buffer the upload
// holds in memory. 10,000 parts of 16 MiB allow artifacts up to 156 GiB;
// raise CAIRN_S3_PART_SIZE_MIB for larger databases.
const DefaultPartSize = 16 << 20

// S3Config are the coordinates and credentials of a bucket.
type S3Config struct {
	// Endpoint is host:port, or a URL whose scheme sets Insecure.
	Endpoint string
	Bucket   string
	Prefix   string
	Insecure bool
	Region   string
	// Credentials: from the environment or mounted files only.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// PartSize of multipart uploads; 0 means DefaultPartSize.
	PartSize uint64
	// MaxRetries of one request; 0 means 5.
	MaxRetries int
	// LockMode is the S3 Object Lock mode artifacts are written with
	// (LockGovernance, LockCompliance), "" for none.
	LockMode string
}

// S3 is an S3-compatible bucket.
type S3 struct {
	cfg    S3Config
	host   string
	client *minio.Client
}

// NewS3 returns a store for the bucket. It does not contact the server.
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("s3 store: endpoint is empty (set CAIRN_S3_ENDPOINT or --s3-endpoint)")
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3 store: bucket is empty (set CAIRN_S3_BUCKET or --s3-bucket)")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("s3 store: credentials missing (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_ACCESS_KEY_ID_FILE and AWS_SECRET_ACCESS_KEY_FILE)")
	}
	host, secure, err := parseEndpoint(cfg.Endpoint, cfg.Insecure)
	if err != nil {
		return nil, err
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 5
	}
	transport := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		ExpectContinueTimeout: 1 * time.Second,
		// Artifacts are already compressed.
		DisableCompression: true,
	}
	client, err := minio.New(host, &minio.Options{
		Creds:      credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:     secure,
		Region:     cfg.Region,
		Transport:  transport,
		MaxRetries: cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 store: %w", err)
	}
	return &S3{cfg: cfg, host: host, client: client}, nil
}

func parseEndpoint(ep string, insecure bool) (host string, secure bool, err error) {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return "", false, fmt.Errorf("s3 store: endpoint %q: %w", ep, err)
		}
		switch u.Scheme {
		case "http":
			secure = false
		case "https":
			secure = true
		default:
			return "", false, fmt.Errorf("s3 store: endpoint %q: scheme must be http or https", ep)
		}
		if u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", false, fmt.Errorf("s3 store: endpoint %q: want scheme://host[:port] without a path", ep)
		}
		return u.Host, secure, nil
	}
	if strings.ContainsAny(ep, "/?#") {
		return "", false, fmt.Errorf("s3 store: endpoint %q: want host[:port] or a URL", ep)
	}
	return ep, !insecure, nil
}

func (s *S3) String() string {
	loc := "s3 " + s.client.EndpointURL().Scheme + "://" + s.host + "/" + s.cfg.Bucket
	if s.cfg.Prefix != "" {
		loc += "/" + s.cfg.Prefix
	}
	return loc
}

func (s *S3) objectKey(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

func (s *S3) Path(key string) string { return s.objectKey(key) }

func (s *S3) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && resp.Code != "" {
		switch resp.Code {
		case "NoSuchKey":
			return fmt.Errorf("%s: %s: %w", s, op, ErrNotFound)
		case "NoSuchBucket":
			return fmt.Errorf("%s: %s: bucket %q does not exist", s, op, s.cfg.Bucket)
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied":
			return fmt.Errorf("%s: %s: access denied (%s): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY", s, op, resp.Code)
		}
		return fmt.Errorf("%s: %s: %s: %s", s, op, resp.Code, resp.Message)
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s unreachable: %s: %w", s, op, err)
	}
	return fmt.Errorf("%s: %s: %w", s, op, err)
}

func (s *S3) Check(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.wrap("check bucket", err)
	}
	if !ok {
		return fmt.Errorf("%s: bucket %q does not exist", s, s.cfg.Bucket)
	}
	return nil
}

func (s *S3) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	return s.put(ctx, key, r, minio.PutObjectOptions{})
}

func (s *S3) put(ctx context.Context, key string, r io.Reader, opts minio.PutObjectOptions) (int64, error) {
	opts.ContentType = "application/octet-stream"
	opts.PartSize = s.cfg.PartSize
	if strings.HasSuffix(key, ".json") {
		opts.ContentType = "application/json"
	}
	// A reader of known length (a catalog) goes up in one PUT; a stream
	// of unknown length as a multipart upload with one part buffer.
	size := int64(-1)
	if l, ok := r.(interface{ Len() int }); ok {
		size = int64(l.Len())
	}
	info, err := s.client.PutObject(ctx, s.cfg.Bucket, s.objectKey(key), r, size, opts)
	if err != nil {
		return info.Size, s.wrap("put "+s.objectKey(key), err)
	}
	return info.Size, nil
}

// Get streams an object with one GET, read straight from the response
// body. Not minio-go's Object: it made a HEAD first and then a GET bound to
// the HEAD's ETag by If-Match. An object replaced between the two failed
// with PreconditionFailed, and so did one deleted while versitygw served
// the GET (its file gone between the server's stat and its read of the
// ETag attribute, it compares If-Match with a default ETag) — a prune
// listing manifests beside a delete failed on it (CI, stop 44) instead of
// skipping a NoSuchKey. And each of its Reads was a round trip through a
// goroutine of its own, which a zstd decoder's 3-byte block-header reads
// paid for (docs/benchmarks-log.md, session 27).
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	op := "get " + s.objectKey(key)
	body, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.cfg.Bucket, s.objectKey(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap(op, err)
	}
	return &s3Reader{body, s, op}, nil
}

// s3Reader reports read errors as the store's (a cut connection is
// "unreachable").
type s3Reader struct {
	io.ReadCloser
	s  *S3
	op string
}

func (r *s3Reader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if err != nil && err != io.EOF {
		err = r.s.wrap(r.op, err)
	}
	return n, err
}

func (s *S3) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.objectKey(key), minio.RemoveObjectOptions{})
	if err != nil {
		var resp minio.ErrorResponse
		if errors.As(err, &resp) && resp.Code == "NoSuchKey" {
			return nil
		}
		return s.wrap("delete "+s.objectKey(key), err)
	}
	return nil
}

func (s *S3) List(ctx context.Context, dir string) ([]Object, error) {
	prefix := s.objectKey(strings.TrimSuffix(dir, "/")) + "/"
	var out []Object
	for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.wrap("list "+prefix, obj.Err)
		}
		key := obj.Key
		if s.cfg.Prefix != "" {
			key = strings.TrimPrefix(key, s.cfg.Prefix+"/")
		}
		out = append(out, Object{Key: key, Size: obj.Size, ModTime: obj.LastModified})
	}
	return out, nil
}

func (s *S3) AbortIncomplete(ctx context.Context, dir string, before time.Time, keep func(string) bool) (int, error) {
	prefix := s.objectKey(strings.TrimSuffix(dir, "/")) + "/"
	n := 0
	for up := range s.client.ListIncompleteUploads(ctx, s.cfg.Bucket, prefix, true) {
		if up.Err != nil {
			return n, s.wrap("list incomplete uploads "+prefix, up.Err)
		}
		if !up.Initiated.IsZero() && !up.Initiated.Before(before) {
			continue
		}
		if keep != nil && keep(strings.TrimPrefix(up.Key, s.cfg.Prefix+"/")) {
			continue
		}
		if err := s.client.RemoveIncompleteUpload(ctx, s.cfg.Bucket, up.Key); err != nil {
			var resp minio.ErrorResponse
			if errors.As(err, &resp) && resp.Code == "NoSuchUpload" {
				continue // completed or aborted meanwhile
			}
			return n, s.wrap("abort upload "+up.Key, err)
		}
		n++
	}
	return n, nil
}
