package node

import (
	"os"
	"path/filepath"
	"testing"

	config "github.com/NVIDIA/nvidia-container-toolkit/api/config/v1"
	"github.com/google/go-cmp/cmp"
)

// runtimeSettings are the toolkit's settings a handler is about.
type runtimeSettings struct {
	AcceptEnvvar bool
	Mode         string
	Runtimes     []string
	DefaultKind  string
	SpecDirs     []string
	Debug        string
}

// Each NVIDIA handler's wrapper hands the runtime its arguments and its
// configuration file, and the toolkit's own loader (GetConfig, what
// nvidia-container-runtime calls, reading $NVIDIA_CTK_CONFIG_FILE_PATH)
// reads that file as the settings the handler is named for. The loader
// ignores keys it does not know and keeps its defaults (accept = true), so
// only reading the file back through it shows the settings took. Runs
// without root: a stand-in takes the runtime's place behind the wrapper.
func TestNVIDIARuntimeConfig(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin dir") // a space the wrapper must quote
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if nvidiaRuntimes(dir, dir, bin) != nil {
		t.Fatalf("handlers registered without %s in %s", nvidiaRuntimeBinary, bin)
	}
	stub := "#!/bin/sh\necho \"$NVIDIA_CTK_CONFIG_FILE_PATH\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, nvidiaRuntimeBinary), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	specDir := filepath.Join(dir, "cdi")
	rts := nvidiaRuntimes(dir, filepath.Join(dir, "logs"), bin)
	classes := map[string]bool{}
	for _, r := range rts {
		classes[r.RuntimeClass] = r.AcceptEnvvar
	}
	if diff := cmp.Diff(map[string]bool{NVIDIARuntimeClass: false, NVIDIAEnvvarRuntimeClass: true}, classes); diff != "" {
		t.Errorf("handlers by RuntimeClass, their accept setting (-want +got):\n%s", diff)
	}
	for _, r := range rts {
		if err := r.write(bin, specDir); err != nil {
			t.Fatal(err)
		}
		out, err := execOutput(r.wrapper(), "create", "--bundle", "/run/a bundle", "id")
		if err != nil {
			t.Fatal(err)
		}
		if want := r.Config + " create --bundle /run/a bundle id\n"; out != want {
			t.Errorf("%s: the runtime behind the wrapper got %q, want %q", r.RuntimeClass, out, want)
		}
		t.Setenv(config.FilePathOverrideEnvVar, r.Config)
		cfg, err := config.GetConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc := cfg.NVIDIAContainerRuntimeConfig
		got := runtimeSettings{cfg.AcceptEnvvarUnprivileged, rc.Mode, rc.Runtimes, rc.Modes.CDI.DefaultKind, rc.Modes.CDI.SpecDirs, rc.DebugFilePath}
		want := runtimeSettings{
			AcceptEnvvar: r.AcceptEnvvar,
			Mode:         "cdi",
			Runtimes:     []string{filepath.Join(bin, "runc")},
			DefaultKind:  "nvidia.com/gpu",
			SpecDirs:     []string{specDir, "/etc/cdi", "/var/run/cdi"},
			Debug:        r.Log,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the toolkit's settings (-want +got):\n%s", r.RuntimeClass, diff)
		}
	}
}
