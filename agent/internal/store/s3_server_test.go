package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"cairn.dev/agent/internal/store"
	"cairn.dev/agent/internal/testenv"
)

// TestS3GetAgainstRealServer reads objects from a real S3 server
// (versitygw): a missing key is ErrNotFound when Get returns, small reads
// (a zstd decoder's 3-byte headers) return the stored bytes, and an object
// deleted or replaced after Get returned still reads as the object Get
// opened, whole — never the PreconditionFailed that a HEAD-then-GET-with-
// If-Match reader got there (a prune listing manifests beside a delete
// failed on it: CI, stop 44).
func TestS3GetAgainstRealServer(t *testing.T) {
	const ak, sk = "cairn-store-test", "cairn-store-test-secret"
	srv, err := testenv.StartS3("", ak, sk)
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.MakeBucket("store-test"); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewS3(store.S3Config{Endpoint: "http://" + srv.Endpoint(), Bucket: "store-test", Prefix: "p", AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if _, err := st.Get(ctx, "missing.json"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
	}

	old := bytes.Repeat([]byte("the object Get opened\n"), 4096)
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := st.Put(ctx, key, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	readSmall := func(r io.Reader) ([]byte, error) {
		var out bytes.Buffer
		b := make([]byte, 3)
		for {
			n, err := r.Read(b)
			out.Write(b[:n])
			if err == io.EOF {
				return out.Bytes(), nil
			}
			if err != nil {
				return out.Bytes(), err
			}
		}
	}

	put("a.json", old)
	rc, err := st.Get(ctx, "a.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readSmall(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("3-byte reads: %d bytes, %v; want the %d stored", len(got), err, len(old))
	}

	for _, change := range []struct {
		name string
		do   func(key string) error
	}{
		{"deleted", func(key string) error { return st.Delete(ctx, key) }},
		{"replaced", func(key string) error {
			_, err := st.Put(ctx, key, bytes.NewReader([]byte("another object")))
			return err
		}},
	} {
		key := change.name + ".json"
		put(key, old)
		rc, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := change.do(key); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, old) {
			t.Errorf("%s after Get returned: read %d bytes, %v; want the %d bytes Get opened", change.name, len(got), err, len(old))
		}
	}
}
