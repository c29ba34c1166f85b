package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// healthOfGPUs sums the kubelet's view by GPU: "Healthy", "Unhealthy", or
// "mixed" when a GPU's devices disagree.
func healthOfGPUs(m *deviceManager) map[string]string {
	out := map[string]string{}
	for id, health := range m.healthOf() {
		uuid, _, _ := ParseDeviceID(id)
		if prev, ok := out[uuid]; ok && prev != health {
			health = "mixed"
		}
		out[uuid] = health
	}
	return out
}

func waitHealth(t *testing.T, m *deviceManager, want map[string]string) {
	t.Helper()
	eventually(t, "the kubelet sees "+fmtHealth(want), func() bool {
		got := healthOfGPUs(m)
		for uuid, h := range want {
			if got[uuid] != h {
				return false
			}
		}
		return true
	})
}

func fmtHealth(h map[string]string) string {
	s := ""
	for uuid, v := range h {
		s += uuid + " " + v + "; "
	}
	return s
}

// probes counts the health watcher's probes of a GPU: its memory queries,
// less discovery's, which asks for the name before each of its own.
func probes(d *device) int {
	return len(d.GetMemoryInfoCalls()) - len(d.GetNameCalls())
}

// stepAndProbe moves the clock on and waits until the watcher has probed
// and acted on what it found: its next event wait begins after that.
func (h *harness) stepAndProbe(d time.Duration) {
	h.t.Helper()
	before := probes(h.gpus[0])
	h.clock.Step(d)
	eventually(h.t, "the GPUs are probed", func() bool { return probes(h.gpus[0]) > before })
	turns := h.nvml.waits.Load()
	eventually(h.t, "the probe is acted on", func() bool { return h.nvml.waits.Load() > turns })
}

const (
	healthy   = pluginapi.Healthy
	unhealthy = pluginapi.Unhealthy
)

// TestXIDMarksGPUUnhealthyUntilRecovered sends an application XID (ignored)
// and a critical one, and expects only the second GPU's devices unhealthy
// in ListAndWatch and its memory gone from the node's capacity; after the
// quiet period, both healthy again.
func TestXIDMarksGPUUnhealthyUntilRecovered(t *testing.T) {
	h := newHarness(t, 2)
	a, m, _ := h.start()
	h.nvml.xid(h.gpus[0], 13) // a workload's fault: the GPU is fine
	h.nvml.xid(h.gpus[1], 48) // a double-bit ECC error
	waitHealth(t, m, map[string]string{"GPU-h100-1": unhealthy})
	if got := healthOfGPUs(m)["GPU-h100-0"]; got != healthy {
		t.Errorf("GPU-h100-0 is %s after XID 13, want %s", got, healthy)
	}
	eventually(t, "the node advertises one GPU's memory", func() bool {
		return h.node().Status.Capacity.Name(ResourceMemoryMiB, "DecimalSI").Value() == 81559
	})

	h.stepAndProbe(h.options().RecoverAfter - 1) // not yet quiet long enough
	if a.GPUs()[1].Healthy {
		t.Error("GPU-h100-1 is healthy before its quiet period ended")
	}
	h.stepAndProbe(probeEvery)
	waitHealth(t, m, map[string]string{"GPU-h100-0": healthy, "GPU-h100-1": healthy})
	eventually(t, "the node advertises both GPUs' memory again", func() bool {
		return h.node().Status.Capacity.Name(ResourceMemoryMiB, "DecimalSI").Value() == 2*81559
	})
}

// TestLostGPUIsUnhealthyUntilItAnswers loses a GPU (NVML answers
// ERROR_GPU_IS_LOST) and brings it back.
func TestLostGPUIsUnhealthyUntilItAnswers(t *testing.T) {
	h := newHarness(t, 2)
	a, m, _ := h.start()
	h.gpus[0].Lost.Store(true)
	h.clock.Step(probeEvery)
	waitHealth(t, m, map[string]string{"GPU-h100-0": unhealthy, "GPU-h100-1": healthy})

	h.stepAndProbe(h.options().RecoverAfter) // lost all along: still unhealthy
	if a.GPUs()[0].Healthy {
		t.Error("a GPU still lost is healthy")
	}
	h.gpus[0].Lost.Store(false)
	h.stepAndProbe(h.options().RecoverAfter)
	waitHealth(t, m, map[string]string{"GPU-h100-0": healthy})
}

// TestXIDWithoutDeviceMarksEveryGPU: NVML may not say which GPU failed.
func TestXIDWithoutDeviceMarksEveryGPU(t *testing.T) {
	h := newHarness(t, 2)
	_, m, _ := h.start()
	h.nvml.xid(nil, 79) // fallen off the bus
	waitHealth(t, m, map[string]string{"GPU-h100-0": unhealthy, "GPU-h100-1": unhealthy})
}

// TestEventWaitErrors: NVML's wait may itself say a GPU is lost (probe them
// all at once) or fail (log, and do not spin).
func TestEventWaitErrors(t *testing.T) {
	devs := h100s(t, 2)
	devs[1].Lost.Store(true)
	var changes []string
	w := &healthWatcher{
		clock: clocktesting.NewFakeClock(time.Now()), probeEvery: time.Hour, recoverAfter: time.Hour,
		devices:  map[string]nvml.Device{devs[0].UUID: devs[0], devs[1].UUID: devs[1]},
		lastBad:  map[string]time.Time{},
		onChange: func(uuid string, healthy bool) { changes = append(changes, fmt.Sprint(uuid, " ", healthy)) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a failed wait sleeps until the next one, or until ctx ends
	w.handle(ctx, nvml.EventData{}, nvml.ERROR_UNKNOWN)
	w.handle(ctx, nvml.EventData{}, nvml.ERROR_TIMEOUT)
	if len(changes) != 0 {
		t.Errorf("a failed or empty wait changed health: %v", changes)
	}
	w.handle(ctx, nvml.EventData{}, nvml.ERROR_GPU_IS_LOST)
	if want := []string{"GPU-h100-1 false"}; !cmp.Equal(want, changes) {
		t.Errorf("after a wait that lost a GPU: changes %v, want %v", changes, want)
	}
}

// TestAgentServesTheGPUsThatAnswer starts an agent with GPU 1 lost: GPU 0
// serves, GPU 1 is published unhealthy with the reason and its devices are
// listed unhealthy; once it answers and stays quiet it serves too.
func TestAgentServesTheGPUsThatAnswer(t *testing.T) {
	h := newHarness(t, 2)
	h.gpus[1].Lost.Store(true)
	a, m, _ := h.start()
	waitHealth(t, m, map[string]string{"GPU-h100-0": healthy, "GPU-h100-1": unhealthy})
	if got := len(m.healthOf()); got != 2*testShares {
		t.Errorf("the kubelet sees %d devices, want %d: the lost GPU's too, unhealthy", got, 2*testShares)
	}
	if g := a.GPUs()[1]; g.Healthy || !strings.Contains(g.Error, "nvml memory") {
		t.Errorf("GPU 1 = healthy %v, error %q; want unhealthy, saying its memory could not be read", g.Healthy, g.Error)
	}
	eventually(t, "the node advertises the answering GPU's memory", func() bool {
		return h.node().Status.Capacity.Name(ResourceMemoryMiB, "DecimalSI").Value() == 81559
	})
	c, err := m.allocate(context.Background(), "a/main", testShares)
	if err != nil || onGPU(t, c) != "GPU-h100-0" {
		t.Fatalf("a whole GPU's shares: %v on %v, want GPU-h100-0", err, c.envs)
	}
	h.gpus[1].Lost.Store(false)
	h.stepAndProbe(h.options().RecoverAfter) // quiet long enough, and rediscovered
	waitHealth(t, m, map[string]string{"GPU-h100-1": healthy})
	if g := a.GPUs()[1]; g.Error != "" || g.MemoryMiB != 81559 {
		t.Errorf("GPU 1 after it answers: %+v", g)
	}
}
