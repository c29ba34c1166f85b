package webhook

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// TestServedOnTheListenerHandedOver: /metrics and /debug/pprof, handed a
// bound listener (a child's inherited socket), are served on exactly it,
// and it is closed when the manager stops them.
func TestServedOnTheListenerHandedOver(t *testing.T) {
	tests := map[string]struct {
		handler http.Handler
		path    string
		want    string
	}{
		"metrics": {handler: metricsHandler(), path: "/metrics", want: "gpuadmit_webhook_certificate_expiry_timestamp_seconds"},
		"pprof":   {handler: pprofHandler(), path: "/debug/pprof/", want: "goroutine"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			s := &served{name: name, ln: ln, handler: tt.handler, log: logr.Discard()}
			go func() { done <- s.Start(ctx) }()
			resp, err := http.Get("http://" + ln.Addr().String() + tt.path)
			if err != nil {
				cancel()
				t.Fatalf("GET %s: %v (Start: %v)", tt.path, err, <-done)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tt.want) {
				t.Errorf("GET %s answered %d without %q:\n%.300s", tt.path, resp.StatusCode, tt.want, body)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				c.Close()
				t.Errorf("%s still accepts connections after %s stopped", ln.Addr(), name)
			}
		})
	}
}
