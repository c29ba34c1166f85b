package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The archive is an OCI image layout whose index names the image for
// containerd and whose blobs are the ones the index and manifest point to.
func TestImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	im := Image{Name: "gpuadmit.local/tool:v1", Files: map[string]string{"/usr/bin/tool": bin}, Symlinks: map[string]string{"/bin/t": "/usr/bin/tool"}, Entrypoint: []string{"/usr/bin/tool"}, Scratch: []string{"/tmp"}, User: "65532:65532"}
	var buf bytes.Buffer
	if err := im.WriteArchive(&buf); err != nil {
		t.Fatal(err)
	}
	files := untar(t, buf.Bytes())
	var index struct {
		Manifests []descriptor
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != im.Name {
		t.Fatalf("index.json = %s", files["index.json"])
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(t, files, index.Manifests[0]), &manifest); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Config struct {
			Entrypoint []string
			User       string
		} `json:"config"`
	}
	if err := json.Unmarshal(blob(t, files, manifest.Config), &config); err != nil {
		t.Fatal(err)
	}
	if config.Config.User != im.User || !cmp.Equal(config.Config.Entrypoint, im.Entrypoint) {
		t.Errorf("config %+v, want user %s and entrypoint %v", config.Config, im.User, im.Entrypoint)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("layers %v", manifest.Layers)
	}
	got := layerEntries(t, blob(t, files, manifest.Layers[0]))
	want := []string{"bin/ dir 755", "tmp/ dir 1777", "usr/ dir 755", "usr/bin/ dir 755", "usr/bin/tool 755", "bin/t -> /usr/bin/tool"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer (-want +got):\n%s", diff)
	}
}

// blob returns the blob d points to, checking its size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
	if !ok || len(b) != d.Size {
		t.Fatalf("blob %s: present %v, %d bytes, want %d", d.Digest, ok, len(b), d.Size)
	}
	return b
}

func untar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
}

// layerEntries lists a layer's entries in order: name, then mode or link.
func layerEntries(t *testing.T, b []byte) []string {
	t.Helper()
	var entries []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			entries = append(entries, fmt.Sprintf("%s dir %o", h.Name, h.Mode))
		case tar.TypeSymlink:
			entries = append(entries, h.Name+" -> "+h.Linkname)
		default:
			entries = append(entries, fmt.Sprintf("%s %o", h.Name, h.Mode))
		}
	}
}

func TestParseLDD(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffc8a9f2000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2b1c000000)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f2b1c3f0000)\n"
	got, err := parseLDD(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2": "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("libraries (-want +got):\n%s", diff)
	}
	if _, err := parseLDD("\tlibnvidia-ml.so.1 => not found\n"); err == nil {
		t.Error("a library ldd cannot find is not an error")
	}
}

// A binary that loads the NVIDIA driver's libraries with dlopen gets, beside
// what ldd names for it, the C library's companions those libraries link,
// from the C library's directory: without them NVML does not load in the
// agent's image on a real GPU node.
func TestDriverSharedLibraries(t *testing.T) {
	bin, err := exec.LookPath("ls") // any dynamically linked binary of this machine
	if err != nil {
		t.Skip("no ls")
	}
	libs, err := DriverSharedLibraries(bin)
	if err != nil {
		t.Fatal(err)
	}
	var libc string
	for inImage := range libs {
		if filepath.Base(inImage) == "libc.so.6" {
			libc = inImage
		}
	}
	if libc == "" {
		t.Skipf("%s links no libc.so.6: %v", bin, libs)
	}
	for _, lib := range cCompanions {
		p := filepath.Join(filepath.Dir(libc), lib)
		if _, err := os.Stat(p); err != nil {
			continue // this machine's C library has no such file
		}
		if libs[p] != p {
			t.Errorf("no %s beside %s in %v", lib, libc, libs)
		}
	}
}
