package ociimage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SharedLibraries lists the shared libraries a dynamically linked binary
// loads at start — its interpreter (the dynamic loader) included — as the
// system's ldd resolves them on this machine: path in the image → file
// here, both the path ldd prints, so the image finds each where the binary
// asks for it. A static binary has none.
func SharedLibraries(binary string) (map[string]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ldd", binary)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String() + stderr.String()
	if strings.Contains(out, "not a dynamic executable") || strings.Contains(out, "statically linked") {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, out)
	}
	return parseLDD(stdout.String())
}

// parseLDD reads ldd's lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
// (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)" and the kernel's
// "linux-vdso.so.1 (0x...)", which is no file. A library ldd cannot find
// is an error: the image would not start.
func parseLDD(out string) (map[string]string, error) {
	libs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			return nil, fmt.Errorf("ldd: %s is not found on this machine", f[0])
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs[f[2]] = f[2]
		case strings.HasPrefix(f[0], "/"):
			libs[f[0]] = f[0]
		}
	}
	return libs, nil
}

// cCompanions are the C library's other libraries that the NVIDIA
// driver's libraries link (libnvidia-ml.so.1 and libcuda.so.1 name libm,
// libdl, libpthread and librt): a binary that loads them with dlopen at
// run time, as go-nvml does, does not name them itself, so ldd cannot.
var cCompanions = []string{"libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1"}

// DriverSharedLibraries is SharedLibraries of a binary that loads the
// NVIDIA driver's libraries with dlopen (the agent, through go-nvml): its
// own, and the C library's companions those libraries need, from the
// directory of the C library it links, where this machine has them. An
// image with only SharedLibraries starts, and then fails to load NVML
// (ERROR_LIBRARY_NOT_FOUND on a real GPU node).
func DriverSharedLibraries(binary string) (map[string]string, error) {
	libs, err := SharedLibraries(binary)
	if err != nil {
		return nil, err
	}
	for inImage, here := range libs {
		if filepath.Base(here) != "libc.so.6" {
			continue
		}
		for _, lib := range cCompanions {
			p := filepath.Join(filepath.Dir(here), lib)
			if _, err := os.Stat(p); err == nil {
				libs[filepath.Join(filepath.Dir(inImage), lib)] = p
			}
		}
	}
	return libs, nil
}
