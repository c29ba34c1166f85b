package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// MPSLimitsFile is the file in the MPS root where the control mode records
// the per-GPU memory limits it set on the daemon. The device plugin serves a
// GPU to MPS clients only when the file holds that GPU at the plugin's share
// size: a client connecting before the limit is set would get none, and the
// daemon applies a default limit only to servers started after it was set.
const MPSLimitsFile = "limits.json"

// MPSLimits is what MPSLimitsFile holds: the limit in MiB by GPU UUID.
type MPSLimits map[string]int64

// MPSControl talks to a CUDA MPS control daemon through its own client,
// nvidia-cuda-mps-control, as NVIDIA's device plugin does: each command is
// one run of the binary with the command on its standard input.
type MPSControl struct {
	// Binary is nvidia-cuda-mps-control (a path, or a name looked up in
	// PATH); empty means that name. The NVIDIA container runtime mounts it.
	Binary string
	// Root is the daemon's directory: pipes in pipe/, logs in log/.
	Root string
}

func (c MPSControl) binary() string {
	if c.Binary == "" {
		return "nvidia-cuda-mps-control"
	}
	return c.Binary
}

// env points the binary at the daemon's pipes and logs.
func (c MPSControl) env() []string {
	return append(os.Environ(),
		EnvMPSPipeDirectory+"="+MPSPipeDir(c.Root),
		"CUDA_MPS_LOG_DIRECTORY="+filepath.Join(c.Root, "log"))
}

// Command sends one command to the daemon and returns its answer.
func (c MPSControl) Command(ctx context.Context, command string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.binary())
	cmd.Env, cmd.Stdin = c.env(), strings.NewReader(command+"\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("MPS control %q: %w: %s", command, err, strings.TrimSpace(out.String()+" "+errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// SetLimit sets the default pinned device memory limit of every new MPS
// client of the GPU dev (its UUID) to mib, and reads it back: the daemon
// answers an unknown device or a malformed value with a message, not an
// exit status.
func (c MPSControl) SetLimit(ctx context.Context, dev string, mib int64) error {
	if _, err := c.Command(ctx, fmt.Sprintf("set_default_device_pinned_mem_limit %s %dM", dev, mib)); err != nil {
		return err
	}
	got, err := c.Command(ctx, "get_default_device_pinned_mem_limit "+dev)
	if err != nil {
		return err
	}
	if !limitShows(got, mib) {
		return fmt.Errorf("MPS control daemon reports the limit of %s as %q after it was set to %dM", dev, got, mib)
	}
	return nil
}

// limitShows reports whether the daemon's answer is mib: it prints a limit
// in M, or in whole G (rounded down) once it is at least a GiB.
func limitShows(answer string, mib int64) bool {
	answer = strings.TrimSpace(answer)
	if n, ok := strings.CutSuffix(answer, "M"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		return err == nil && v == mib
	}
	if n, ok := strings.CutSuffix(answer, "G"); ok {
		v, err := strconv.ParseInt(n, 10, 64)
		return err == nil && v == mib/1024
	}
	return false
}

// Start runs the control daemon in the foreground as a child (so the
// container lives as long as it does) and waits until it answers a command.
// A control socket and pid file left by a daemon that was killed (the pipe
// directory is on the host and outlives the container) are removed first,
// so an old socket is never taken for the new daemon.
func (c MPSControl) Start(ctx context.Context) (*exec.Cmd, error) {
	for _, d := range []string{MPSPipeDir(c.Root), filepath.Join(c.Root, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("MPS control daemon: %w", err)
		}
	}
	for _, stale := range []string{"control", "nvidia-cuda-mps-control.pid"} {
		if err := os.Remove(filepath.Join(MPSPipeDir(c.Root), stale)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("MPS control daemon: remove stale %s: %w", stale, err)
		}
	}
	cmd := exec.Command(c.binary(), "-f")
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env(), os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start MPS control daemon: %w", err)
	}
	socket := filepath.Join(MPSPipeDir(c.Root), "control")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(socket); err == nil {
			if _, err := c.Command(ctx, "get_server_list"); err == nil {
				return cmd, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("MPS control daemon: it does not answer on %s after 30s", socket)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop tells the daemon to quit, and kills it when it does not listen.
func (c MPSControl) stop(ctx context.Context, daemon *exec.Cmd, exited <-chan error) {
	if _, err := c.Command(context.WithoutCancel(ctx), "quit"); err != nil {
		_ = daemon.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = daemon.Process.Kill()
		<-exited
	}
}

// Limits is the limit of every GPU that serves shares: one share, the
// device plugin's share size, the same on every such GPU of the node.
func Limits(gpus []GPU, sharesPerGPU int64) MPSLimits {
	unit := shareUnitMiB(gpus, int(sharesPerGPU))
	out := MPSLimits{}
	for _, g := range gpus {
		if g.Shares() && g.UUID != "" && unit > 0 {
			out[g.UUID] = unit
		}
	}
	return out
}

// RunMPS is --mode=mps-control: it starts the control daemon, sets the
// limit of every GPU that serves shares, records them in MPSLimitsFile, and
// keeps the daemon until ctx ends, when it tells it to quit. gpus is the
// node's discovery.
func RunMPS(ctx context.Context, c MPSControl, gpus []GPU, sharesPerGPU int64) error {
	limits := Limits(gpus, sharesPerGPU)
	if len(limits) == 0 {
		return fmt.Errorf("no GPU serves shares here: nothing for MPS to limit")
	}
	path := filepath.Join(c.Root, MPSLimitsFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", path, err)
	}
	daemon, err := c.Start(ctx)
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	if err := setLimits(ctx, c, limits, path); err != nil {
		c.stop(ctx, daemon, exited)
		return err
	}
	select {
	case err := <-exited:
		_ = os.Remove(path)
		return fmt.Errorf("MPS control daemon exited: %w", err)
	case <-ctx.Done():
	}
	_ = os.Remove(path)
	c.stop(ctx, daemon, exited)
	return nil
}

// setLimits sets each limit on the daemon, then records them all.
func setLimits(ctx context.Context, c MPSControl, limits MPSLimits, path string) error {
	for uuid, mib := range limits {
		if err := c.SetLimit(ctx, uuid, mib); err != nil {
			return err
		}
	}
	// A default limit holds only for servers started after it was set: a
	// client that connected in between (a container restarting under the
	// previous daemon, which Allocate never sees again) would have started
	// an unlimited server. Then start over rather than serve it.
	servers, err := c.Command(ctx, "get_server_list")
	if err != nil {
		return err
	}
	if servers != "" {
		return fmt.Errorf("MPS servers %s started before the memory limits were set; restarting the daemon", strings.Join(strings.Fields(servers), ", "))
	}
	b, err := json.Marshal(limits)
	if err != nil {
		return fmt.Errorf("encode MPS limits: %w", err)
	}
	return cdi.WriteAtomic(path, b)
}

// readMPSLimits reads the limits the control daemon holds; none when it has
// not set them (yet).
func readMPSLimits(root string) (MPSLimits, error) {
	b, err := os.ReadFile(filepath.Join(root, MPSLimitsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return MPSLimits{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MPS limits: %w", err)
	}
	var l MPSLimits
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decode %s: %w", filepath.Join(root, MPSLimitsFile), err)
	}
	return l, nil
}

// checkMPS refuses a container the daemon would not hold to its memory: on
// a GPU whose limit is not set at the share size, or with more than one
// share, since the daemon's limit is one share per client process.
func checkMPS(root string, a allocation, unitMiB int64) error {
	if a.shares != 1 {
		return fmt.Errorf("%d shares in one container: under MPS the control daemon holds every client to one share (%d MiB), so a container takes exactly one", a.shares, unitMiB)
	}
	limits, err := readMPSLimits(root)
	if err != nil {
		return err
	}
	if got, ok := limits[a.uuid]; !ok || got != unitMiB {
		return fmt.Errorf("the MPS control daemon does not hold GPU %s to %d MiB per client (its limits: %v): is the gpuadmit MPS control daemon running on this node?", a.uuid, unitMiB, limits)
	}
	return nil
}
