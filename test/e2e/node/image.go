package node

import (
	"fmt"
	"strings"

	"github.com/gpuadmit/gpuadmit/internal/ociimage"
)

// The images every node has, for pods with imagePullPolicy Never.
const (
	// BusyboxImage holds Debian's busybox-static as /bin/busybox with every
	// applet linked beside it in /bin (sh, cat, sleep, ...), and /tmp; PATH
	// is /bin.
	BusyboxImage = "gpuadmit.local/busybox:e2e"
	// PauseImage is the sandbox image: containerd's default name (v2.4),
	// set again as pinned_images.sandbox in its configuration so the two
	// cannot drift apart, holding test/e2e/node/pause as /pause.
	PauseImage = "registry.k8s.io/pause:3.10.2"
)

// Image is a one-layer OCI image of files on this machine (package ociimage,
// which `make images` shares).
type Image = ociimage.Image

// busyboxImage is BusyboxImage from the busybox binary at bin, with a
// symlink in /bin for each applet it lists.
func busyboxImage(bin string) (Image, error) {
	out, err := execOutput(bin, "--list")
	if err != nil {
		return Image{}, fmt.Errorf("list busybox applets: %w", err)
	}
	im := Image{Name: BusyboxImage, Files: map[string]string{"/bin/busybox": bin}, Symlinks: map[string]string{}, Scratch: []string{"/tmp"}}
	for _, applet := range strings.Fields(out) {
		if applet != "busybox" {
			im.Symlinks["/bin/"+applet] = "busybox"
		}
	}
	return im, nil
}

// pauseImage is PauseImage from the pause binary at bin.
func pauseImage(bin string) Image {
	return Image{Name: PauseImage, Files: map[string]string{"/pause": bin}, Entrypoint: []string{"/pause"}, Env: []string{}}
}
