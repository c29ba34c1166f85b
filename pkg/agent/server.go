package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// registerTimeout bounds one registration call to the kubelet.
const registerTimeout = 10 * time.Second

// server serves the plugin on a unix socket in the kubelet's device-plugin
// directory and registers it. The kubelet deletes every socket there when it
// starts and then creates its own, so the creation of kubelet.sock (or the
// removal of ours) means: serve anew and register again.
type server struct {
	plugin   *Plugin
	dir      string // the kubelet's device-plugin directory
	socket   string // the plugin's socket, a file name in dir
	resource string
	retry    time.Duration
	clock    clock.Clock
}

func (s *server) kubeletSocket() string {
	return filepath.Join(s.dir, filepath.Base(pluginapi.KubeletSocket))
}
func (s *server) pluginSocket() string { return filepath.Join(s.dir, s.socket) }

// run serves and registers until ctx ends, again after every kubelet
// restart, retrying failures every s.retry or as soon as a kubelet socket
// appears.
func (s *server) run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", s.dir, err)
	}
	defer w.Close()
	if err := w.Add(s.dir); err != nil {
		return fmt.Errorf("watch %s: %w", s.dir, err)
	}
	r := round{needed: true}
	defer r.end(s)
	for {
		if r.needed {
			s.begin(ctx, &r)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.retry:
			r.needed = true
		case ev := <-w.Events:
			r.needed = r.needed || s.restarted(ev, r.kubelet)
		case err := <-w.Errors:
			logf.FromContext(ctx).Error(err, "Watching the device-plugin directory")
		}
	}
}

// round is one serving of the plugin: its server, the kubelet socket it
// registered with (nil until it did), and when to try again.
type round struct {
	srv     *grpc.Server
	kubelet os.FileInfo
	retry   <-chan time.Time
	needed  bool
}

// begin ends the current round and starts another: serve, then register.
func (s *server) begin(ctx context.Context, r *round) {
	log := logf.FromContext(ctx)
	r.end(s)
	*r = round{}
	srv, err := s.serve(log)
	if err == nil {
		r.srv = srv
		r.kubelet, err = s.register(ctx)
	}
	if err != nil {
		log.Error(err, "Device plugin not registered; retrying", "after", s.retry)
		r.retry = s.clock.After(s.retry)
		return
	}
	log.Info("Registered with the kubelet", "resource", s.resource, "socket", s.pluginSocket())
}

func (r *round) end(s *server) {
	if r.srv != nil {
		s.stop(r.srv)
	}
}

// restarted reports whether ev says the kubelet restarted since the plugin
// registered with kubeletSocket: a kubelet socket that is not the one the
// plugin registered with appeared, or the plugin's socket is gone (the
// kubelet removes every socket when it starts). Events the plugin's own
// restart causes (its socket removed and made again) say neither.
func (s *server) restarted(ev fsnotify.Event, kubeletSocket os.FileInfo) bool {
	switch {
	case ev.Name == s.kubeletSocket() && ev.Has(fsnotify.Create):
		now, err := os.Stat(ev.Name)
		return err == nil && (kubeletSocket == nil || !sameSocket(now, kubeletSocket))
	case ev.Name == s.pluginSocket() && ev.Has(fsnotify.Remove):
		_, err := os.Stat(ev.Name)
		return errors.Is(err, fs.ErrNotExist)
	}
	return false
}

// sameSocket reports whether two looks at a socket saw the same file; the
// time guards against a new socket that reuses the old one's inode.
func sameSocket(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}

// serve listens on the plugin's socket, replacing a stale one, and serves.
func (s *server) serve(log logr.Logger) (*grpc.Server, error) {
	path := s.pluginSocket()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(logf.IntoContext(ctx, log), req)
		}),
	)
	pluginapi.RegisterDevicePluginServer(srv, s.plugin)
	go func() {
		if err := srv.Serve(l); err != nil {
			log.Error(err, "Device plugin server stopped")
		}
	}()
	return srv, nil
}

// stop ends the server and every ListAndWatch stream, and removes the socket.
func (s *server) stop(srv *grpc.Server) {
	srv.Stop()
	_ = os.Remove(s.pluginSocket()) // the kubelet may have removed it already
}

// register tells the kubelet where the plugin is and what it serves, and
// returns the kubelet socket it registered with.
func (s *server) register(ctx context.Context) (os.FileInfo, error) {
	socket, err := os.Stat(s.kubeletSocket())
	if err != nil {
		return nil, fmt.Errorf("kubelet socket: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+s.kubeletSocket(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// Registration waits for a socket that is not yet listening: retry it soon.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{
			BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second,
		}}))
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", s.kubeletSocket(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	// The socket file appears when the kubelet binds it, a moment before it
	// listens: wait for it to accept rather than fail on the first refusal.
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     s.socket,
		ResourceName: s.resource,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("register %s with the kubelet: %w", s.resource, err)
	}
	return socket, nil
}
