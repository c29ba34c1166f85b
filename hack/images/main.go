// Command images builds gpuadmit's images without a container engine (`make
// images`): it builds the binaries the Dockerfiles build, the same way, and
// writes each image as an OCI image layout archive (internal/ociimage):
//
//	<out>/gpuadmit.tar        <registry>/gpuadmit:<tag>        /gpuadmit-webhook, static, user 65532
//	<out>/gpuadmit-agent.tar  <registry>/gpuadmit-agent:<tag>  /gpuadmit-agent (cgo, for NVML) and the
//	                                                          loader and libc it links, from this machine
//
// Load them with `ctr -n k8s.io images import`, `kind load image-archive`,
// `podman load` or `skopeo copy oci-archive:...`. The tag defaults to the
// chart's appVersion, which the manifests name. gpuadmit-scheduler (its own
// module, minutes to build) is left to its Dockerfile.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"github.com/gpuadmit/gpuadmit/internal/ociimage"
)

func main() {
	out := flag.String("out", ".bin/images", "directory the archives go to")
	registry := flag.String("registry", "ghcr.io/gpuadmit", "registry and path of the image names")
	tag := flag.String("tag", "", "image tag; empty: the chart's appVersion")
	agentTags := flag.String("agent-tags", "", "build tags of the agent's binary (go build -tags)")
	flag.Parse()
	if err := run(*out, *registry, *tag, *agentTags); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(out, registry, tag, agentTags string) error {
	if tag == "" {
		var err error
		if tag, err = appVersion("deploy/helm/gpuadmit/Chart.yaml"); err != nil {
			return err
		}
	}
	bin, err := os.MkdirTemp("", "gpuadmit-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	webhook, agent := filepath.Join(bin, "gpuadmit-webhook"), filepath.Join(bin, "gpuadmit-agent")
	if err := goBuild(webhook, "./cmd/webhook", "0", ""); err != nil {
		return err
	}
	if err := goBuild(agent, "./cmd/agent", "1", agentTags); err != nil {
		return err
	}
	libs, err := ociimage.DriverSharedLibraries(agent)
	if err != nil {
		return err
	}
	libs["/gpuadmit-agent"] = agent
	images := map[string]ociimage.Image{
		"gpuadmit.tar": {Name: registry + "/gpuadmit:" + tag, Files: map[string]string{"/gpuadmit-webhook": webhook},
			Entrypoint: []string{"/gpuadmit-webhook"}, User: "65532:65532", Env: []string{}},
		"gpuadmit-agent.tar": {Name: registry + "/gpuadmit-agent:" + tag, Files: libs,
			Entrypoint: []string{"/gpuadmit-agent"}, Env: []string{}},
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for file, im := range images {
		if err := write(filepath.Join(out, file), im); err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", filepath.Join(out, file), im.Name)
	}
	return nil
}

// goBuild builds pkg as the Dockerfiles do: trimmed, stripped, cgo and
// build tags as given.
func goBuild(dst, pkg, cgo, tags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags="+tags, "-o", dst, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS=linux")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

func write(path string, im ociimage.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := im.WriteArchive(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// appVersion reads the chart's appVersion, the tag the manifests name.
func appVersion(chart string) (string, error) {
	b, err := os.ReadFile(chart)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s has no appVersion", chart)
	}
	return string(m[1]), nil
}
