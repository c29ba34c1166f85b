package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The dev root defaults to the driver root only where that root's dev/
// holds the control node (a driver container's root); a read-only driver
// install with an empty dev/ (as on an H200 machine with the driver at
// /usr/local/nvidia) keeps the host's /dev.
func TestDefaultDevRoot(t *testing.T) {
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := defaultDevRoot("/usr/local/nvidia", empty); got != "/" {
		t.Errorf("driver root with an empty dev/: dev root %q, want /", got)
	}
	if got := defaultDevRoot("/usr/local/nvidia", t.TempDir()); got != "/" {
		t.Errorf("driver root without dev/: dev root %q, want /", got)
	}
	withNodes := t.TempDir()
	if err := os.Mkdir(filepath.Join(withNodes, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := unix.Mknod(filepath.Join(withNodes, "dev", "nvidiactl"), unix.S_IFCHR|0o666, int(unix.Mkdev(195, 255)))
	if errors.Is(err, unix.EPERM) {
		t.Skip("mknod needs CAP_MKNOD (root)")
	} else if err != nil {
		t.Fatal(err)
	}
	if got := defaultDevRoot("/run/nvidia/driver", withNodes); got != "/run/nvidia/driver" {
		t.Errorf("driver container's root with dev/nvidiactl: dev root %q, want the driver root", got)
	}
}
