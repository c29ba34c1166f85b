package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// Files of the record-key directory, a mounted Secret.
const (
	recordKeySecret = "gpuadmit-record-key" // the Secret the manifests mount there

	keyFileCurrent  = "current"
	keyFilePrevious = "previous"
)

// recordKeys serves the keys that seal gpuadmit's record from a directory
// (the Secret gpuadmit-record-key mounted as files) and reloads them when
// they change, as the serving certificate is. A Secret volume is updated by
// an atomic symlink swap, so a poll never reads half a key. A key that is
// unreadable or too short is refused and the keys loaded before stay in
// force; no current key at all (the optional Secret is absent) seals
// nothing, and returning pods are then decided again.
//
// Rotation, with every replica accepting a key before any seals with it:
// first set previous to the new key (replicas now accept it), wait for the
// Secret to reach every replica (about a minute), then swap the two.
type recordKeys struct {
	dir       string
	interval  time.Duration
	log       logr.Logger
	onMissing func() // called each time the keys in force become none, the first load included
	loaded    bool   // a load succeeded; reloads are sequential (newRecordKeys, then Start)
	keys      atomic.Pointer[record.KeySet]
}

var _ record.KeySource = (*recordKeys)(nil)

// newRecordKeys loads the keys in dir once; reloads follow from Start.
// onMissing, if set, is called whenever a load finds no current key.
func newRecordKeys(dir string, interval time.Duration, log logr.Logger, onMissing func()) (*recordKeys, error) {
	r := &recordKeys{dir: dir, interval: interval, log: log, onMissing: onMissing}
	r.keys.Store(&record.KeySet{})
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// RecordKeys returns the keys loaded last.
func (r *recordKeys) RecordKeys() record.KeySet { return *r.keys.Load() }

// NeedLeaderElection is false: every replica seals and verifies.
func (r *recordKeys) NeedLeaderElection() bool { return false }

// Start polls the directory until ctx ends.
func (r *recordKeys) Start(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := r.reload(); err != nil {
				r.log.Error(err, "record keys not reloaded; the keys loaded before stay in force", "dir", r.dir)
			}
		}
	}
}

// reload reads the directory and swaps the keys in when they changed.
func (r *recordKeys) reload() error {
	next, err := readKeys(r.dir)
	if err != nil {
		return err
	}
	old := r.keys.Load()
	if r.loaded && bytes.Equal(old.Current, next.Current) && bytes.Equal(old.Previous, next.Previous) {
		return nil
	}
	r.loaded = true
	r.keys.Store(&next)
	if len(next.Current) == 0 {
		r.log.Info("no record key: records are not sealed, and pods that come back are decided again", "dir", r.dir, "secret", recordKeySecret)
		if r.onMissing != nil {
			r.onMissing()
		}
		return nil
	}
	r.log.Info("record keys loaded", "dir", r.dir, "current", record.KeyID(next.Current), "previous", keyIDOrNone(next.Previous))
	return nil
}

// readKeys reads current and previous from dir; a missing file is no key.
func readKeys(dir string) (record.KeySet, error) {
	var ks record.KeySet
	for name, dst := range map[string]*[]byte{keyFileCurrent: &ks.Current, keyFilePrevious: &ks.Previous} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return record.KeySet{}, fmt.Errorf("read record key %s: %w", name, err)
		}
		*dst = bytes.TrimSpace(b)
	}
	if err := ks.Validate(); err != nil {
		return record.KeySet{}, fmt.Errorf("record keys in %s: %w", dir, err)
	}
	return ks, nil
}

func keyIDOrNone(key []byte) string {
	if len(key) == 0 {
		return "none"
	}
	return record.KeyID(key)
}
