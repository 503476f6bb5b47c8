package store

import (
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		ep         string
		insecure   bool
		wantHost   string
		wantSecure bool
		wantErr    string
	}{
		{ep: "minio:9000", wantHost: "minio:9000", wantSecure: true},
		{ep: "minio:9000", insecure: true, wantHost: "minio:9000", wantSecure: false},
		{ep: "http://minio:9000", wantHost: "minio:9000", wantSecure: false},
		{ep: "https://s3.amazonaws.com", insecure: true, wantHost: "s3.amazonaws.com", wantSecure: true},
		{ep: "https://s3.amazonaws.com/", wantHost: "s3.amazonaws.com", wantSecure: true},
		{ep: "ftp://x", wantErr: "scheme"},
		{ep: "http://x/bucket", wantErr: "without a path"},
		{ep: "x/bucket", wantErr: "host[:port]"},
	}
	for _, tt := range tests {
		t.Run(tt.ep, func(t *testing.T) {
			host, secure, err := parseEndpoint(tt.ep, tt.insecure)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || host != tt.wantHost || secure != tt.wantSecure {
				t.Fatalf("parseEndpoint = %q, %v, %v; want %q, %v", host, secure, err, tt.wantHost, tt.wantSecure)
			}
		})
	}
}

func TestNewS3Requires(t *testing.T) {
	full := S3Config{Endpoint: "h:1", Bucket: "b", AccessKey: "a", SecretKey: "s"}
	tests := []struct {
		name    string
		mod     func(*S3Config)
		wantErr string
	}{
		{"ok", func(*S3Config) {}, ""},
		{"no endpoint", func(c *S3Config) { c.Endpoint = "" }, "CAIRN_S3_ENDPOINT"},
		{"no bucket", func(c *S3Config) { c.Bucket = "" }, "CAIRN_S3_BUCKET"},
		{"no key", func(c *S3Config) { c.AccessKey = "" }, "AWS_ACCESS_KEY_ID"},
		{"no secret", func(c *S3Config) { c.SecretKey = "" }, "AWS_SECRET_ACCESS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := full
			tt.mod(&c)
			s, err := NewS3(c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := s.Path("ns/j/x"); got != "ns/j/x" {
					t.Errorf("Path = %q", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	c := full
	c.Prefix = "/backups/prod/"
	c.SecretKey = "very-secret-key-value"
	s, err := NewS3(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Path("ns/j/x"); got != "backups/prod/ns/j/x" {
		t.Errorf("Path with prefix = %q", got)
	}
	if strings.Contains(s.String(), c.SecretKey) || !strings.Contains(s.String(), "h:1/b/backups/prod") {
		t.Errorf("String = %s", s)
	}
}

func TestPVCKeys(t *testing.T) {
	p, err := NewPVC(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "../x", "a/../../x", "/abs", "a//b", "a/./b"} {
		if _, err := p.file(bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if _, err := p.file("ns/job/x.pgdump.zst"); err != nil {
		t.Errorf("good key refused: %v", err)
	}
}
