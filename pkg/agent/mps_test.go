package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeMPSControl is nvidia-cuda-mps-control as far as gpuadmit uses it: -f
// runs the daemon (its control socket a plain file here) until a quit;
// otherwise one command on standard input, logged, with the limits kept
// per device and shown as the real daemon shows them (whole G from a GiB).
const fakeMPSControl = `#!/bin/sh
pipe=$CUDA_MPS_PIPE_DIRECTORY
if [ "$1" = -f ]; then
  touch "$pipe/control"
  while [ ! -e "$pipe/quit" ]; do sleep 0.02; done
  exit 0
fi
read -r cmd dev value
echo "$cmd $dev $value" >>"$pipe/commands"
case $cmd in
set_default_device_pinned_mem_limit) echo "$value" >"$pipe/limit-$dev" ;;
get_default_device_pinned_mem_limit)
  v=$(cat "$pipe/limit-$dev" 2>/dev/null || echo 0M); m=${v%M}
  if [ "$m" -ge 1024 ]; then echo "$((m / 1024))G"; else echo "$v"; fi ;;
quit) touch "$pipe/quit" ;;
esac
`

func newFakeMPSControl(t *testing.T) MPSControl {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nvidia-cuda-mps-control")
	if err := os.WriteFile(bin, []byte(fakeMPSControl), 0o755); err != nil {
		t.Fatal(err)
	}
	return MPSControl{Binary: bin, Root: filepath.Join(dir, "mps")}
}

// TestRunMPS: the control mode sets one share per GPU that serves shares
// on the daemon, by UUID, checks each, records them for the plugin, and
// quits the daemon and withdraws the record when it stops.
func TestRunMPS(t *testing.T) {
	c := newFakeMPSControl(t)
	gpus := []GPU{
		{UUID: "GPU-a", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true},
		{UUID: "GPU-b", MemoryMiB: 143771, MIGMode: MIGDisabled, Healthy: true},
		{UUID: "GPU-mig", MemoryMiB: 81559, MIGMode: MIGEnabled, Healthy: true},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunMPS(ctx, c, gpus, 4) }()

	limitsFile := filepath.Join(c.Root, MPSLimitsFile)
	var got MPSLimits
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(limitsFile); err == nil && json.Unmarshal(b, &got) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no limits recorded after 10s")
		}
	}
	if diff := cmp.Diff(MPSLimits{"GPU-a": 20389, "GPU-b": 20389}, got); diff != "" {
		t.Errorf("recorded limits (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunMPS: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(MPSPipeDir(c.Root), "commands"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"set_default_device_pinned_mem_limit GPU-a 20389M", "get_default_device_pinned_mem_limit GPU-b", "quit"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("daemon commands:\n%s\nwant %q among them", log, want)
		}
	}
	if _, err := os.Stat(limitsFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the limits record outlived the daemon: %v", err)
	}
}

// TestSetLimitChecksTheDaemon: a limit the daemon does not report back
// after setting it fails, with what it reported.
func TestSetLimitChecksTheDaemon(t *testing.T) {
	c := newFakeMPSControl(t)
	if err := os.MkdirAll(MPSPipeDir(c.Root), 0o755); err != nil {
		t.Fatal(err)
	}
	// The daemon keeps a limit it was sent; make it keep another.
	if err := os.WriteFile(c.Binary, []byte(strings.Replace(fakeMPSControl, `echo "$value" >`, `echo 5M >`, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	err := c.SetLimit(context.Background(), "GPU-a", 20389)
	if err == nil || !strings.Contains(err.Error(), `reports the limit of GPU-a as "5M" after it was set to 20389M`) {
		t.Errorf("SetLimit: %v, want the daemon's answer named", err)
	}
}

func TestLimitShows(t *testing.T) {
	tests := map[string]struct {
		answer string
		mib    int64
		want   bool
	}{
		"in M":               {answer: "900M", mib: 900, want: true},
		"in whole G":         {answer: "19G", mib: 20389, want: true},
		"another G":          {answer: "20G", mib: 20389},
		"off":                {answer: "0M", mib: 20389},
		"a message":          {answer: "Invalid device", mib: 20389},
		"with a line ending": {answer: "19G\n", mib: 20389, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := limitShows(tc.answer, tc.mib); got != tc.want {
				t.Errorf("limitShows(%q, %d) = %v, want %v", tc.answer, tc.mib, got, tc.want)
			}
		})
	}
}

// TestRunMPSRestartsWhenAServerPredatesTheLimits: a server the daemon
// started before the limits were set (a client that connected in between)
// holds no limit, so the control mode quits the daemon and fails rather
// than record limits that do not hold; a stale control socket from a killed
// daemon is not taken for the new one.
func TestRunMPSRestartsWhenAServerPredatesTheLimits(t *testing.T) {
	c := newFakeMPSControl(t)
	early := strings.Replace(fakeMPSControl, "quit) touch", `get_server_list) if [ -e "$pipe/limit-GPU-a" ]; then echo 4242; fi ;;
quit) touch`, 1)
	if err := os.WriteFile(c.Binary, []byte(early), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(MPSPipeDir(c.Root), 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(MPSPipeDir(c.Root), "control")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	gpus := []GPU{{UUID: "GPU-a", MemoryMiB: 81559, MIGMode: MIGDisabled, Healthy: true}}
	err := RunMPS(context.Background(), c, gpus, 4)
	if err == nil || !strings.Contains(err.Error(), "MPS servers 4242 started before the memory limits were set") {
		t.Fatalf("RunMPS: %v, want the early server named", err)
	}
	if _, err := os.Stat(filepath.Join(MPSPipeDir(c.Root), "quit")); err != nil {
		t.Errorf("the daemon was not told to quit: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Root, MPSLimitsFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("limits recorded although a server predates them: %v", err)
	}
}
