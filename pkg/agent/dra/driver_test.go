package dra

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// node is two shared H100s and an H100 with MIG instances 3g.40gb (GI 1)
// and 1g.10gb (GI 2).
func node(t *testing.T) []allocator.NodeGPU {
	h100 := model(t, "H100-80GB")
	return []allocator.NodeGPU{wholeGPU(h100, 0), wholeGPU(h100, 1), migGPU(h100, 2, "3g.40gb", "1g.10gb")}
}

// readCDI returns a claim's CDI spec file, nil when there is none.
func readCDI(t *testing.T, k *kubelet, c *resourceapi.ResourceClaim) *cdispec.Spec {
	t.Helper()
	b, err := os.ReadFile(cdiPath(k.opts.CDIDir, c.UID))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	spec := &cdispec.Spec{}
	if err := json.Unmarshal(b, spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestPrepareNamesDevices: each allocated device becomes the CDI device of
// its GPU or MIG device, by UUID, with the claim's memory.
func TestPrepareNamesDevices(t *testing.T) {
	gpus := node(t)
	mig := migUUID(gpus[2], 1)
	tests := map[string]struct {
		claim   *resourceapi.ResourceClaim
		wantEnv map[string][]string // by CDI device ID; TEST_DEVICE is the stand-in's
	}{
		"a 10 GiB share": {
			claim:   claim("share", alloc{"gpu-0", 10}),
			wantEnv: map[string][]string{"gpuadmit.io/gpu=uid-share-r0-gpu-0": {"TEST_DEVICE=" + gpus[0].UUID, "GPUADMIT_MEMORY_LIMIT_MIB=10240"}},
		},
		"a whole GPU gets all its memory": {
			claim:   claim("whole", alloc{"gpu-1", whole}),
			wantEnv: map[string][]string{"gpuadmit.io/gpu=uid-whole-r0-gpu-1": {"TEST_DEVICE=" + gpus[1].UUID, "GPUADMIT_MEMORY_LIMIT_MIB=81559"}},
		},
		"a MIG instance by its MIG UUID": {
			claim:   claim("mig", alloc{"gpu-2-mig-3g-40gb-1", 0}),
			wantEnv: map[string][]string{"gpuadmit.io/gpu=uid-mig-r0-gpu-2-mig-3g-40gb-1": {"TEST_DEVICE=" + mig, "GPUADMIT_MEMORY_LIMIT_MIB=40448"}},
		},
		"two devices, one CDI device each": {
			claim: claim("two", alloc{"gpu-0", 4}, alloc{"gpu-2-mig-1g-10gb-2", 0}),
			wantEnv: map[string][]string{
				"gpuadmit.io/gpu=uid-two-r0-gpu-0":               {"TEST_DEVICE=" + gpus[0].UUID, "GPUADMIT_MEMORY_LIMIT_MIB=4096"},
				"gpuadmit.io/gpu=uid-two-r1-gpu-2-mig-1g-10gb-2": {"TEST_DEVICE=" + migUUID(gpus[2], 2), "GPUADMIT_MEMORY_LIMIT_MIB=9984"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k := newKubelet(t, gpus...)
			k.add(tc.claim)
			got := k.prepare(tc.claim)[string(tc.claim.UID)]
			if got.Error != "" {
				t.Fatalf("prepare failed: %s", got.Error)
			}
			ids := map[string][]string{}
			for i, d := range got.Devices {
				r := tc.claim.Status.Allocation.Devices.Results[i]
				if d.PoolName != testNode || d.DeviceName != r.Device || !cmp.Equal(d.RequestNames, []string{r.Request}) {
					t.Errorf("device %d is %s/%s for %v, want %s/%s for %s", i, d.PoolName, d.DeviceName, d.RequestNames, testNode, r.Device, r.Request)
				}
				for _, id := range d.CdiDeviceIds {
					ids[id] = nil
				}
			}
			spec := readCDI(t, k, tc.claim)
			if spec == nil || spec.Kind != CDIKind {
				t.Fatalf("CDI spec %+v, want one of kind %s", spec, CDIKind)
			}
			env := map[string][]string{}
			for _, d := range spec.Devices {
				env[CDIKind+"="+d.Name] = d.ContainerEdits.Env
			}
			if diff := cmp.Diff(tc.wantEnv, env); diff != "" {
				t.Errorf("CDI devices' env (-want +got):\n%s", diff)
			}
			for id := range tc.wantEnv {
				if _, ok := ids[id]; !ok {
					t.Errorf("the kubelet did not get CDI device %s; got %v", id, ids)
				}
			}
		})
	}
}

func TestPrepareIsIdempotent(t *testing.T) {
	k := newKubelet(t, node(t)...)
	a, b := claim("a", alloc{"gpu-0", 10}), claim("b", alloc{"gpu-0", 60})
	k.add(a, b)
	first := k.prepare(a, b)
	for uid, r := range first {
		if r.Error != "" {
			t.Fatalf("claim %s: %s", uid, r.Error)
		}
	}
	if diff := cmp.Diff(first, k.prepare(a, b), protocmp.Transform()); diff != "" {
		t.Errorf("prepared twice (-first +second):\n%s", diff)
	}
	k.restart()
	if diff := cmp.Diff(first, k.prepare(b, a), protocmp.Transform()); diff != "" {
		t.Errorf("prepared again after a restart (-first +after):\n%s", diff)
	}
	// The memory held before the restart still counts: 70 of 79.6 GiB.
	c := claim("c", alloc{"gpu-0", 10})
	k.add(c)
	if got := k.prepare(c)[string(c.UID)].Error; !strings.Contains(got, "over-commit") {
		t.Errorf("10 GiB more after a restart: error %q, want an over-commit refusal", got)
	}
}

// TestPrepareAfterRebootWritesCDIAgain is a node reboot: the kubelet
// prepares its claims again, the checkpoint survived but the CDI specs
// (a tmpfs) did not. Answering from the checkpoint alone would give the
// runtime CDI IDs with no spec behind them, and the containers would never
// start.
func TestPrepareAfterRebootWritesCDIAgain(t *testing.T) {
	k := newKubelet(t, node(t)...)
	a, m := claim("a", alloc{"gpu-0", 10}), claim("m", alloc{"gpu-2-mig-3g-40gb-1", 0})
	k.add(a, m)
	first := k.prepare(a, m)
	before := map[string]*cdispec.Spec{"a": readCDI(t, k, a), "m": readCDI(t, k, m)}
	k.reboot()
	if diff := cmp.Diff(first, k.prepare(a, m), protocmp.Transform()); diff != "" {
		t.Errorf("prepared again after a reboot (-before +after):\n%s", diff)
	}
	after := map[string]*cdispec.Spec{"a": readCDI(t, k, a), "m": readCDI(t, k, m)}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("CDI specs after a reboot (-before +after):\n%s", diff)
	}
}

// TestPrepareAfterRebootRefusesAGoneDevice: a claim's device that is not
// there after the reboot fails the claim with its name, rather than
// answering CDI IDs that nothing backs; so does a device name that is now
// another GPU.
func TestPrepareAfterRebootRefusesAGoneDevice(t *testing.T) {
	gpus := node(t)
	k := newKubelet(t, gpus...)
	a, m := claim("a", alloc{"gpu-1", 10}), claim("m", alloc{"gpu-2-mig-3g-40gb-1", 0})
	k.add(a, m)
	k.prepare(a, m)

	swapped := wholeGPU(model(t, "H100-80GB"), 1)
	swapped.UUID = "GPU-99999999-0000-0000-0000-000000000000"
	k.reboot(gpus[0], swapped, migGPU(model(t, "H100-80GB"), 2, "1g.10gb"))
	got := k.prepare(a, m)
	want := map[string]string{
		"uid-a": "claim ns/a: device gpu-1 it was prepared on is tainted gpu.gpuadmit.io/gone: the pod is to be evicted",
		"uid-m": "claim ns/m: device gpu-2-mig-3g-40gb-1 it was prepared on is tainted gpu.gpuadmit.io/gone: the pod is to be evicted",
	}
	if diff := cmp.Diff(want, map[string]string{"uid-a": got["uid-a"].Error, "uid-m": got["uid-m"].Error}); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestPrepareBeforeDiscoveryKeepsTheSpec: an agent that restarted (no
// reboot) and has not discovered its GPUs yet answers a claim whose spec is
// still there from its checkpoint, as before.
func TestPrepareBeforeDiscoveryKeepsTheSpec(t *testing.T) {
	k := newKubelet(t, node(t)...)
	a := claim("a", alloc{"gpu-0", 10})
	k.add(a)
	first := k.prepare(a)
	k.gpus = nil // not discovered yet
	k.restart()
	if diff := cmp.Diff(first, k.prepare(a), protocmp.Transform()); diff != "" {
		t.Errorf("prepared again before discovery (-before +after):\n%s", diff)
	}
}

func TestPrepareRefuses(t *testing.T) {
	tests := map[string]struct {
		held, next *resourceapi.ResourceClaim
		wantErr    string
	}{
		"a share that would over-commit the GPU": {
			held: claim("held", alloc{"gpu-0", 40}), next: claim("next", alloc{"gpu-0", 40}),
			wantErr: "claim ns/next: device gpu-0: the claim consumes 40960 MiB but other claims already hold 40960 of its 81559 MiB: that would over-commit the GPU",
		},
		"a whole GPU beside a share": {
			held: claim("held", alloc{"gpu-0", 1}), next: claim("next", alloc{"gpu-0", whole}),
			wantErr: "claim ns/next: device gpu-0: the claim wants the whole device but 1 other claims are prepared on it",
		},
		"a share beside a whole GPU": {
			held: claim("held", alloc{"gpu-0", whole}), next: claim("next", alloc{"gpu-0", 1}),
			wantErr: "claim ns/next: device gpu-0: already prepared for another claim that has the whole device",
		},
		"a MIG instance twice": {
			held: claim("held", alloc{"gpu-2-mig-1g-10gb-2", 0}), next: claim("next", alloc{"gpu-2-mig-1g-10gb-2", 0}),
			wantErr: "claim ns/next: device gpu-2-mig-1g-10gb-2: already prepared for another claim that has the whole device",
		},
		"a device the node does not publish": {
			held: claim("held", alloc{"gpu-0", 1}), next: claim("next", alloc{"gpu-9", 1}),
			wantErr: "claim ns/next: device gpu-9 is not published on this node (gone or unhealthy)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k := newKubelet(t, node(t)...)
			ok := claim("ok", alloc{"gpu-1", 8})
			k.add(tc.held, tc.next, ok)
			if err := k.prepare(tc.held)[string(tc.held.UID)].Error; err != "" {
				t.Fatalf("first claim: %s", err)
			}
			got := k.prepare(tc.next, ok)
			if diff := cmp.Diff(tc.wantErr, got[string(tc.next.UID)].Error); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
			if err := got[string(ok.UID)].Error; err != "" {
				t.Errorf("a claim in the same call failed with the refused one: %s", err)
			}
			if readCDI(t, k, tc.next) != nil {
				t.Errorf("a refused claim left a CDI spec")
			}
		})
	}
}

// TestPrepareRefusesAClassNotGpuadmits: a device allocated through a
// DeviceClass that is not gpuadmit's (one an administrator added whose
// selector reaches gpuadmit's devices, or one with its own
// extendedResourceName) is refused, whether the class is named by the
// request or by the firstAvailable subrequest that was allocated; gpuadmit's
// classes by either way pass.
func TestPrepareRefusesAClassNotGpuadmits(t *testing.T) {
	exact := func(class string) func(*resourceapi.ResourceClaim) {
		return func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.DeviceClassName = class }
	}
	// sub moves the request into a firstAvailable subrequest "s1" of class,
	// after a first subrequest "s0" of gpuadmit's that was not allocated.
	sub := func(class string) func(*resourceapi.ResourceClaim) {
		return func(c *resourceapi.ResourceClaim) {
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{
				{Name: "s0", DeviceClassName: ClassGPU},
				{Name: "s1", DeviceClassName: class, Capacity: r.Exactly.Capacity},
			}
			r.Exactly = nil
			c.Status.Allocation.Devices.Results[0].Request = r.Name + "/s1"
		}
	}
	tests := map[string]struct {
		edit    func(*resourceapi.ResourceClaim)
		wantErr string
	}{
		"gpuadmit's share class":               {edit: exact(ClassShare)},
		"gpuadmit's share class, a subrequest": {edit: sub(ClassShare)},
		"a class an administrator added": {edit: exact("fast-gpus.example.com"),
			wantErr: `claim ns/c: device gpu-0 was allocated through DeviceClass "fast-gpus.example.com", which is not gpuadmit's: gpuadmit prepares its devices only for claims through its own classes (names ending .gpuadmit.io), which its admission policy guards; ask through one of those`},
		"a class an administrator added, a subrequest": {edit: sub("fast-gpus.example.com"),
			wantErr: `claim ns/c: device gpu-0 was allocated through DeviceClass "fast-gpus.example.com", which is not gpuadmit's: gpuadmit prepares its devices only for claims through its own classes (names ending .gpuadmit.io), which its admission policy guards; ask through one of those`},
		"a class suffixed like gpuadmit's but not a domain of it": {edit: exact("gpu.notgpuadmit.io"),
			wantErr: `claim ns/c: device gpu-0 was allocated through DeviceClass "gpu.notgpuadmit.io", which is not gpuadmit's: gpuadmit prepares its devices only for claims through its own classes (names ending .gpuadmit.io), which its admission policy guards; ask through one of those`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k := newKubelet(t, node(t)...)
			c := claim("c", alloc{"gpu-0", 8})
			tc.edit(c)
			k.add(c)
			if diff := cmp.Diff(tc.wantErr, k.prepare(c)[string(c.UID)].Error); diff != "" {
				t.Errorf("prepare (-want +got):\n%s", diff)
			}
			if got := readCDI(t, k, c) != nil; got != (tc.wantErr == "") {
				t.Errorf("CDI spec written: %v, want %v", got, tc.wantErr == "")
			}
		})
	}
}

func TestUnprepare(t *testing.T) {
	k := newKubelet(t, node(t)...)
	a, big := claim("a", alloc{"gpu-0", 40}), claim("big", alloc{"gpu-0", 70})
	k.add(a, big)
	if err := k.prepare(a)[string(a.UID)].Error; err != "" {
		t.Fatal(err)
	}
	never := claim("never", alloc{"gpu-0", 1})
	if diff := cmp.Diff(map[string]string{"uid-a": "", "uid-never": ""}, k.unprepare(a, never)); diff != "" {
		t.Errorf("unprepare errors (-want +got):\n%s", diff)
	}
	if readCDI(t, k, a) != nil {
		t.Errorf("the CDI spec of an unprepared claim is still there")
	}
	k.restart() // the checkpoint forgot it too
	if err := k.prepare(big)[string(big.UID)].Error; err != "" {
		t.Errorf("70 GiB after the 40 GiB claim was unprepared: %s", err)
	}
	if diff := cmp.Diff(map[string]string{"uid-a": ""}, k.unprepare(a)); diff != "" {
		t.Errorf("unpreparing twice (-want +got):\n%s", diff)
	}
}

// TestReleaseDeleted: claims deleted while the agent was down (the kubelet
// could not unprepare them) are released when it starts, and their memory
// is free again; claims still in the API, and a claim whose name now
// belongs to a new claim, are told apart by UID.
func TestReleaseDeleted(t *testing.T) {
	k := newKubelet(t, node(t)...)
	kept, deleted, renamed := claim("kept", alloc{"gpu-0", 30}), claim("deleted", alloc{"gpu-0", 40}), claim("renamed", alloc{"gpu-1", 8})
	k.add(kept, deleted, renamed)
	k.prepare(kept, deleted, renamed)

	k.helper.Stop() // the agent is down
	ctx := context.Background()
	for _, c := range []*resourceapi.ResourceClaim{deleted, renamed} {
		if err := k.api.ResourceV1().ResourceClaims(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	again := claim("renamed", alloc{"gpu-1", 8})
	again.UID = "uid-renamed-again"
	k.add(again)
	k.start()

	gone, err := k.driver.ReleaseDeleted(ctx, k.api)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(gone)
	if diff := cmp.Diff([]types.UID{"uid-deleted", "uid-renamed"}, gone); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	if readCDI(t, k, deleted) != nil || readCDI(t, k, renamed) != nil {
		t.Errorf("a released claim's CDI spec is still there")
	}
	if readCDI(t, k, kept) == nil {
		t.Errorf("the kept claim's CDI spec is gone")
	}
	// 30 GiB still held of 79.6: 45 GiB fits only once the 40 GiB are free.
	big := claim("big", alloc{"gpu-0", 45})
	k.add(big)
	if err := k.prepare(big)[string(big.UID)].Error; err != "" {
		t.Errorf("45 GiB after the deleted 40 GiB claim was released: %s", err)
	}
	k.restart() // the checkpoint forgot them too
	if gone, err := k.driver.ReleaseDeleted(ctx, k.api); err != nil || len(gone) != 0 {
		t.Errorf("second round released %v, %v; want nothing", gone, err)
	}
}

// TestTaints: an unhealthy GPU's devices are published NoSchedule-tainted
// (no new claims; pods on it keep running), while a device that prepared
// claims hold but that is gone (a MIG instance deleted under its claim), or
// whose name is now another GPU, is published NoExecute-tainted, so the
// device-taint eviction controller evicts their pods; preparing a claim on
// a gone device is refused. A gone device no claim holds is not published.
func TestTaints(t *testing.T) {
	h100 := model(t, "H100-80GB")
	sick := wholeGPU(h100, 1)
	sick.Healthy = false
	swapped := wholeGPU(h100, 3)
	swapped.UUID = "GPU-99999999-0000-0000-0000-000000000000"
	k := newKubelet(t, append(node(t), wholeGPU(h100, 3))...)
	held, onSwapped := claim("held", alloc{"gpu-2-mig-3g-40gb-1", 0}), claim("on-3", alloc{"gpu-3", 8})
	k.add(held, onSwapped)
	k.prepare(held, onSwapped)

	// GPU 1 turns unhealthy; both MIG instances of GPU 2 are deleted; GPU 3 is another GPU now.
	got := map[string][]resourceapi.DeviceTaint{}
	for _, d := range k.driver.SetGPUs([]allocator.NodeGPU{wholeGPU(h100, 0), sick, migGPU(h100, 2), swapped}, nil) {
		got[d.Name] = d.Taints
	}
	taint := func(key string, effect resourceapi.DeviceTaintEffect) []resourceapi.DeviceTaint {
		return []resourceapi.DeviceTaint{{Key: key, Effect: effect}}
	}
	want := map[string][]resourceapi.DeviceTaint{
		"gpu-0": nil, "gpu-1": taint(TaintUnhealthy, resourceapi.DeviceTaintEffectNoSchedule),
		"gpu-2-mig-3g-40gb-1": taint(TaintGone, resourceapi.DeviceTaintEffectNoExecute),
		"gpu-3":               taint(TaintGone, resourceapi.DeviceTaintEffectNoExecute),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published taints (-want +got):\n%s", diff)
	}
	again := claim("again", alloc{"gpu-2-mig-3g-40gb-1", 0})
	k.add(again)
	if err := k.prepare(again)[string(again.UID)].Error; !strings.Contains(err, "device gpu-2-mig-3g-40gb-1 is tainted gpu.gpuadmit.io/gone") {
		t.Errorf("preparing on a gone device: %q, want a refusal naming the taint", err)
	}
}
