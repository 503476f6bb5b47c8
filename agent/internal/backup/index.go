package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"cairn.dev/agent/internal/catalog"
	"cairn.dev/agent/internal/naming"
	"cairn.dev/agent/internal/store"
)

// How many manifests are read at once.
const manifestReaders = 8

// Largest manifest or legacy catalog read.
const maxIndexBytes = 64 << 20

// readListing reads the job's directory in the order catalog.Listing
// explains: in-progress markers, manifests (decoded), the legacy catalog,
// then every object.
func (b *Runner) readListing(ctx context.Context, st store.Store) (catalog.Listing, error) {
	job := b.cfg.BackupJob
	var l catalog.Listing
	markers, err := st.List(ctx, job.RunningPrefix())
	if err != nil {
		return l, err
	}
	l.Markers = toCatalogObjects(markers)
	mobjs, err := st.List(ctx, job.EntriesPrefix())
	if err != nil {
		return l, err
	}
	if l.Manifests, err = b.readManifests(ctx, st, mobjs); err != nil {
		return l, err
	}
	if l.Legacy, err = b.loadLegacyCatalog(ctx, st); err != nil {
		return l, err
	}
	objs, err := st.List(ctx, job.Dir())
	if err != nil {
		return l, err
	}
	l.Objects = toCatalogObjects(objs)
	return l, nil
}

// LoadIndex returns the job's catalog: every listed artifact that is
// present, oldest first.
func (b *Runner) LoadIndex(ctx context.Context, st store.Store) (*catalog.Catalog, catalog.Listing, error) {
	l, err := b.readListing(ctx, st)
	if err != nil {
		return nil, l, err
	}
	return catalog.Index(b.cfg.BackupJob, l.Manifests, l.Legacy, l.Objects), l, nil
}

func (b *Runner) readManifests(ctx context.Context, st store.Store, objs []store.Object) ([]catalog.Entry, error) {
	job := b.cfg.BackupJob
	var (
		mu      sync.Mutex
		entries []catalog.Entry
		errs    []error
		wg      sync.WaitGroup
		next    = make(chan string)
	)
	for range min(manifestReaders, len(objs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				e, err := readManifest(ctx, st, job, key)
				mu.Lock()
				switch {
				case errors.Is(err, store.ErrNotFound):
					// Deleted by a prune since it was listed.
				case err != nil:
					errs = append(errs, err)
				default:
					entries = append(entries, e)
				}
				mu.Unlock()
			}
		}()
	}
	for _, o := range objs {
		if _, ok := catalog.ManifestName(job, o.Key); ok {
			next <- o.Key
		}
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: refusing to go on rather than lose track of an artifact", errors.Join(errs...))
	}
	return entries, nil
}

func readManifest(ctx context.Context, st store.Store, job naming.Job, key string) (catalog.Entry, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return catalog.Entry{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxIndexBytes))
	if err != nil {
		return catalog.Entry{}, fmt.Errorf("read manifest %s: %w", st.Path(key), err)
	}
	return catalog.DecodeManifest(data, job, key)
}

// loadLegacyCatalog reads the catalog.json of agents before manifests, or
// returns nil when there is none.
func (b *Runner) loadLegacyCatalog(ctx context.Context, st store.Store) (*catalog.Catalog, error) {
	job := b.cfg.BackupJob
	rc, err := st.Get(ctx, job.CatalogKey())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxIndexBytes))
	if err != nil {
		return nil, fmt.Errorf("read catalog %s: %w", st.Path(job.CatalogKey()), err)
	}
	c, err := catalog.Decode(data, job)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): refusing to go on rather than lose track of its artifacts", err, st.Path(job.CatalogKey()))
	}
	return c, nil
}

// WriteManifest lists a complete artifact.
func (b *Runner) WriteManifest(ctx context.Context, st store.Store, e catalog.Entry) error {
	data, err := catalog.EncodeManifest(b.cfg.BackupJob, e)
	if err != nil {
		return err
	}
	if _, err := st.Put(ctx, b.cfg.BackupJob.ManifestKey(e.Name), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// marker is the in-progress marker of a backup run.
type marker struct {
	Artifact     string    `json:"artifact"`
	Start        time.Time `json:"start"`
	Refreshed    time.Time `json:"refreshed"`
	AgentVersion string    `json:"agentVersion,omitempty"`
}

// StartMarker writes the in-progress marker of the backup writing name and
// refreshes it every catalog.MarkerRefresh until stop is called, so that no
// prune takes the run's artifact or upload for a leftover however long it
// runs. stop deletes the marker; call it only after the manifest is
// written (a failed deletion only leaves a marker that goes stale).
func (b *Runner) StartMarker(ctx context.Context, st store.Store, name string, start time.Time) (stop func(), err error) {
	key := b.cfg.BackupJob.MarkerKey(name)
	put := func() error {
		data, _ := json.Marshal(marker{Artifact: name, Start: start, Refreshed: b.now(), AgentVersion: b.version})
		_, err := st.Put(ctx, key, bytes.NewReader(append(data, '\n')))
		return err
	}
	if err := put(); err != nil {
		return nil, fmt.Errorf("write in-progress marker: %w", err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := b.markerRefresh
		if every == 0 {
			every = catalog.MarkerRefresh
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := put(); err != nil {
					b.log.Warn("cannot refresh the in-progress marker", "marker", st.Path(key), "error", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		if err := st.Delete(context.WithoutCancel(ctx), key); err != nil {
			b.log.Warn("cannot delete the in-progress marker; a prune removes it once stale", "marker", st.Path(key), "error", err)
		}
	}, nil
}

func toCatalogObjects(objs []store.Object) []catalog.Object {
	out := make([]catalog.Object, len(objs))
	for i, o := range objs {
		out[i] = catalog.Object{Key: o.Key, ModTime: o.ModTime}
	}
	return out
}
