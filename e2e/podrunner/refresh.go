package podrunner

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// VolumeSync is how often the configMap and Secret volumes of a running pod
// are brought up to date with their objects (the kubelet does it on its
// periodic pod sync, about a minute plus its cache's TTL; shorter here so
// that a test waits seconds, not minutes). A manager reloading its webhook
// certificate from such a volume sees a rotated Secret this way.
const VolumeSync = 10 * time.Second

// syncedVolume is a configMap or Secret volume of a pod, projected into dir.
type syncedVolume struct {
	namespace string
	volume    corev1.Volume
	dir       string
	fsGroup   *int64
}

// syncVolumes keeps a running pod's configMap and Secret volumes up to
// date until the pod ends: every VolumeSync it reads each object again and
// rewrites in place what changed (each file renamed into the mounted
// folder, so a reader sees the old or the new content whole; a key gone is
// removed). An object that cannot be read (gone, the API server away)
// leaves the files as they are, as the kubelet does.
func (p *provider) syncVolumes(st *podState, vols []syncedVolume) {
	for p.pause(st, VolumeSync) && !p.isFinished(st) {
		for _, v := range vols {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			files, err := p.volumeFiles(ctx, v.namespace, v.volume)
			cancel()
			if err != nil {
				continue
			}
			changed, err := updateProjected(v.dir, files, v.fsGroup)
			switch {
			case err != nil:
				p.logf("pod runner: pod %s/%s: updating volume %s: %v", st.pod.Namespace, st.pod.Name, v.volume.Name, err)
			case len(changed) > 0:
				p.logf("pod runner: pod %s/%s: volume %s updated from its object: %s", st.pod.Namespace, st.pod.Name, v.volume.Name, strings.Join(changed, ", "))
			}
		}
	}
}

// updateProjected makes dir hold exactly files, rewriting only the files
// whose content or mode changed and removing those no longer wanted; it
// returns the paths it changed.
func updateProjected(dir string, files []projectedFile, fsGroup *int64) ([]string, error) {
	var changed []string
	want := map[string]bool{}
	for _, f := range files {
		file := filepath.Join(dir, filepath.Clean("/"+f.path))
		want[file] = true
		mode := os.FileMode(f.mode) & os.ModePerm
		if fsGroup != nil {
			mode |= 0o440
		}
		if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, f.data) {
			if fi, err := os.Stat(file); err == nil && fi.Mode().Perm() == mode {
				continue
			}
		}
		if err := writeFile(file, f, fsGroup); err != nil {
			return changed, err
		}
		changed = append(changed, f.path)
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || want[path] {
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		changed = append(changed, rel+" (removed)")
		return nil
	})
	return changed, err
}
