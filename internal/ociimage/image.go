// Package ociimage writes one-layer OCI images of files on this machine as
// OCI image layout archives (what `ctr images import`, `kind load
// image-archive` and `podman load` read), without a container engine: the
// real-node tests' images and `make images` are made this way.
package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
)

// Image is a one-layer OCI image of files on this machine.
type Image struct {
	// Name is the full reference containerd stores it under (host/repo:tag).
	Name string
	// Files maps a path in the image to the file on this machine it copies
	// (mode included).
	Files map[string]string
	// Symlinks maps a path in the image to its target.
	Symlinks map[string]string
	// Scratch are empty directories anyone may write, like /tmp (mode 1777).
	Scratch []string
	// Entrypoint is the image's entrypoint; nil leaves it to the pod.
	Entrypoint []string
	// Env is the image's environment; nil means PATH=/bin.
	Env []string
	// User is the image's user ("65532:65532"); empty means root.
	User string
}

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// WriteArchive writes the image as an OCI image layout in a tar stream, as
// `ctr images import` reads it: the index names the image in containerd's
// annotation io.containerd.image.name. The layer is uncompressed, so its
// digest is its diff ID.
func (im Image) WriteArchive(w io.Writer) error {
	layer, err := im.layer()
	if err != nil {
		return fmt.Errorf("image %s: %w", im.Name, err)
	}
	env := im.Env
	if env == nil {
		env = []string{"PATH=/bin"}
	}
	blobs := map[string][]byte{}
	add := func(media string, b []byte) descriptor {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return descriptor{MediaType: media, Digest: d, Size: len(b)}
	}
	layerDesc := add(mediaLayer, layer)
	config := add(mediaConfig, mustJSON(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": im.Entrypoint, "Env": env, "WorkingDir": "/", "User": im.User},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	}))
	manifest := add(mediaManifest, mustJSON(map[string]any{
		"schemaVersion": 2, "mediaType": mediaManifest, "config": config, "layers": []descriptor{layerDesc},
	}))
	manifest.Platform = &platform{Architecture: runtime.GOARCH, OS: "linux"}
	manifest.Annotations = map[string]string{"io.containerd.image.name": im.Name}
	if i := strings.LastIndex(im.Name, ":"); i > strings.LastIndex(im.Name, "/") {
		manifest.Annotations["org.opencontainers.image.ref.name"] = im.Name[i+1:]
	}
	index := mustJSON(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{manifest}})

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		b    []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}}
	for _, d := range slices.Sorted(maps.Keys(blobs)) {
		files = append(files, struct {
			name string
			b    []byte
		}{"blobs/sha256/" + strings.TrimPrefix(d, "sha256:"), blobs[d]})
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.b))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layer is the image's one filesystem layer: every parent directory, the
// files, the symlinks.
func (im Image) layer() ([]byte, error) {
	dirs := map[string]bool{}
	for _, p := range append(slices.Collect(maps.Keys(im.Files)), slices.Collect(maps.Keys(im.Symlinks))...) {
		for d := path.Dir(strings.TrimPrefix(p, "/")); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range im.Scratch {
		dirs[strings.Trim(d, "/")] = true
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		mode := int64(0o755)
		if slices.Contains(im.Scratch, "/"+d) {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode}); err != nil {
			return nil, err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(im.Files)) {
		b, err := os.ReadFile(im.Files[p])
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(im.Files[p])
		if err != nil {
			return nil, err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: int64(fi.Mode().Perm()), Size: int64(len(b))}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(im.Symlinks)) {
		h := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(p, "/"), Linkname: im.Symlinks[p], Mode: 0o777}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
