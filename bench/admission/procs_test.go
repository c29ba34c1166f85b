package admission

import (
	"errors"
	"testing"

	"github.com/gpuadmit/gpuadmit/internal/listener"
)

// TestChildExitedOnATakenPort: a child that exits because a port it was
// given had been taken says so (listener.ErrTaken), so its start is made
// again on a new port; one that exits otherwise does not.
func TestChildExitedOnATakenPort(t *testing.T) {
	tests := map[string]struct {
		log   string
		taken bool
	}{
		"its bind failed":   {log: "listen tcp 127.0.0.1:35269: bind: address already in use", taken: true},
		"it failed another": {log: "open tls.crt: no such file or directory"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := startChild("/bin/sh", "server", t.TempDir(), "-c", `echo "$0"; exit 1`, tt.log)
			if err != nil {
				t.Fatal(err)
			}
			<-c.done
			err = c.exited()
			if err == nil || errors.Is(err, listener.ErrTaken) != tt.taken {
				t.Errorf("exited() = %v; want an error, ErrTaken %v", err, tt.taken)
			}
		})
	}
}
