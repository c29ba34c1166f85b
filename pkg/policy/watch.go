package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// WatchOptions tunes a Watcher. The zero value works.
type WatchOptions struct {
	// Interval is how often the path is checked even without file events
	// (some volumes deliver none). Zero means ten seconds.
	Interval time.Duration
	// Debounce is how long to wait after a file event for the swap to finish. Zero means 250ms.
	Debounce time.Duration
	// OnFailure is called once per failed set (not per retry), e.g. to record an Event.
	OnFailure func(path string, err error)
	// OnLoad is called when a new set goes live.
	OnLoad func(*Set)
	// Clock is injected for tests; nil means the real clock.
	Clock clock.WithTicker
}

// Status is what a Watcher reports for readiness detail.
type Status struct {
	// Revision is the active set's revision; empty before the first good load.
	Revision string
	// Failure is the last load failure of a set that is still on disk, with its time; empty when none.
	Failure   string
	FailedAt  time.Time
	LastCheck time.Time
}

// Watcher keeps an Engine's active set in step with a policy path that a
// git-sync sidecar or a mounted ConfigMap updates by atomic symlink swaps. It
// reloads when the files behind the path change, however the swap happened:
// file events on the path and its parent, and a periodic check of a
// fingerprint of the resolved files, so a missed event only delays a reload.
type Watcher struct {
	engine *Engine
	path   string
	opts   WatchOptions
	log    logr.Logger

	mu          sync.Mutex
	fingerprint string
	status      Status
}

// NewWatcher watches path (a directory or a .tar.gz bundle) for engine.
func NewWatcher(engine *Engine, path string, log logr.Logger, opts WatchOptions) *Watcher {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 250 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Watcher{engine: engine, path: path, opts: opts, log: log}
}

// Status returns the watcher's view for readiness detail.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// NeedLeaderElection is false: every replica serves with its own engine.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start loads the set once, then reloads on changes until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	w.Check(ctx)
	events := make(chan struct{}, 1)
	stop, err := w.notify(events)
	if err != nil {
		w.log.Error(err, "file events unavailable; checking periodically only", "path", w.path)
	} else {
		defer stop()
	}
	tick := w.opts.Clock.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		case <-events:
			w.opts.Clock.Sleep(w.opts.Debounce)
		}
		w.Check(ctx)
	}
}

// Check reloads the set if the files behind the path changed since the last
// check. A set that fails is reported once and not retried until it changes.
func (w *Watcher) Check(ctx context.Context) {
	fp, err := fingerprint(w.path)
	w.mu.Lock()
	w.status.LastCheck = w.opts.Clock.Now()
	same := err == nil && fp == w.fingerprint
	w.mu.Unlock()
	if same {
		return
	}
	if err != nil {
		w.fail(fp, fmt.Errorf("read policy path %s: %w", w.path, err))
		return
	}
	set, err := w.engine.Load(ctx, Path(w.path))
	if err != nil {
		w.fail(fp, err)
		return
	}
	w.mu.Lock()
	w.fingerprint, w.status.Revision, w.status.Failure = fp, set.Revision, ""
	w.mu.Unlock()
	w.log.Info("policy set active", "revision", set.Revision, "path", w.path, "tests", len(set.Tests))
	if w.opts.OnLoad != nil {
		w.opts.OnLoad(set)
	}
}

func (w *Watcher) fail(fp string, err error) {
	w.mu.Lock()
	w.fingerprint = fp
	w.status.Failure, w.status.FailedAt = err.Error(), w.opts.Clock.Now()
	active := w.status.Revision
	w.mu.Unlock()
	w.log.Error(err, "policy set not activated; the last good set keeps serving", "path", w.path, "activeRevision", active)
	if w.opts.OnFailure != nil {
		w.opts.OnFailure(w.path, err)
	}
}

// notify sends on events when the path, its resolved target or its parent
// directory change. The parent catches a symlink swap of the path itself.
func (w *Watcher) notify(events chan<- struct{}) (func(), error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, p := range []string{w.path, filepath.Dir(filepath.Clean(w.path))} {
		if err := fw.Add(p); err != nil {
			fw.Close()
			return nil, err
		}
	}
	go func() {
		for range fw.Events {
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		for err := range fw.Errors {
			w.log.Error(err, "file events", "path", w.path)
		}
	}()
	return func() { fw.Close() }, nil
}

// fingerprint identifies the files a load would read: the path resolved
// through symlinks, and every policy file's name, size and modification time.
func fingerprint(path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, resolved)
	err = filepath.WalkDir(resolved, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != resolved && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Stat(p)
		if err != nil || info.IsDir() {
			return err
		}
		fmt.Fprintf(h, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
