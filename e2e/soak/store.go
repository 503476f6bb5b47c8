package soak

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
)

// readStore lists every object under prefixes of the bucket, reads each
// manifest (<dir>/entries/<artifact>.json) and hashes every other object
// except in-progress markers (<dir>/running/…), which it counts.
func readStore(ctx context.Context, mc *minio.Client, bucket string, prefixes []string) (Store, int, error) {
	st := Store{Objects: map[string]StoreObject{}}
	markers := 0
	for _, p := range prefixes {
		for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: p + "/", Recursive: true}) {
			if o.Err != nil {
				return st, markers, fmt.Errorf("soak: listing s3://%s/%s: %w", bucket, p, o.Err)
			}
			dir, name, isManifest := strings.Cut(o.Key, "/entries/")
			switch {
			case strings.Contains(o.Key, "/running/"):
				markers++
			case isManifest && strings.HasSuffix(name, ".json"):
				m, err := readManifest(ctx, mc, bucket, o.Key)
				if err != nil {
					return st, markers, err
				}
				m.Artifact = path.Join(dir, m.Artifact)
				st.Manifests = append(st.Manifests, m)
			default:
				sum, n, err := hashObject(ctx, mc, bucket, o.Key)
				if err != nil {
					return st, markers, err
				}
				st.Objects[o.Key] = StoreObject{Size: n, SHA256: sum}
			}
		}
	}
	return st, markers, nil
}

// readManifest reads a catalog entry: the agent's manifest (kind
// CairnBackupManifest) names its artifact relative to the BackupJob's
// directory.
func readManifest(ctx context.Context, mc *minio.Client, bucket, key string) (Manifest, error) {
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return Manifest{}, err
	}
	defer obj.Close()
	var m struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		Checksum string `json:"checksum"`
	}
	if err := json.NewDecoder(obj).Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("soak: manifest s3://%s/%s: %w", bucket, key, err)
	}
	if m.Kind != "CairnBackupManifest" || m.Name == "" {
		return Manifest{}, fmt.Errorf("soak: s3://%s/%s is not a backup manifest (kind %q, name %q)", bucket, key, m.Kind, m.Name)
	}
	return Manifest{Key: key, Artifact: m.Name, Size: m.Size, Checksum: m.Checksum}, nil
}

func hashObject(ctx context.Context, mc *minio.Client, bucket, key string) (string, int64, error) {
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", 0, err
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if err != nil {
		return "", 0, fmt.Errorf("soak: reading s3://%s/%s: %w", bucket, key, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}
