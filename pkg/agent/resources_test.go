package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// validExtendedResource applies the API server's rules for an extended
// resource name, and for the quota key ResourceQuota makes of it.
func validExtendedResource(name string) []string {
	errs := validation.IsQualifiedName(name)
	errs = append(errs, validation.IsQualifiedName("requests."+name)...)
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") {
		errs = append(errs, "not in a domain of its own")
	}
	return errs
}

func TestModelResourceIsValidForEveryModel(t *testing.T) {
	names := []string{"NVIDIA-RTX-A6000", "Mock NVIDIA (A100) SXM4", "-odd-", "", strings.Repeat("LONG-", 30)}
	for _, m := range allocator.Default().Models() {
		names = append(names, m.Name)
	}
	seen := map[string]string{}
	for _, model := range names {
		r := ModelResource(model)
		if errs := validExtendedResource(r); len(errs) > 0 {
			t.Errorf("ModelResource(%q) = %q: %v", model, r, errs)
		}
		if other, dup := seen[r]; dup {
			t.Errorf("models %q and %q share the resource %s", other, model, r)
		}
		seen[r] = model
	}
	if got := ModelResource("H100-80GB"); got != "gpuadmit.io/h100-80gb-mib" {
		t.Errorf("ModelResource(H100-80GB) = %s, want gpuadmit.io/h100-80gb-mib", got)
	}
}

// TestNamesAgreeWithInventory holds the agent to the names pkg/inventory
// reads: the webhook requests what the agent advertises.
func TestNamesAgreeWithInventory(t *testing.T) {
	if ResourceMemoryMiB != inventory.ResourceMemoryMiB || ResourceShare != inventory.ResourceShare {
		t.Errorf("agent names %s, %s differ from inventory's %s, %s", ResourceMemoryMiB, ResourceShare,
			inventory.ResourceMemoryMiB, inventory.ResourceShare)
	}
	for _, m := range allocator.Default().Models() {
		if a, i := ModelResource(m.Name), inventory.ModelResource(m.Name); a != i {
			t.Errorf("model %s: the agent advertises %s, the inventory reads %s", m.Name, a, i)
		}
	}
}

func TestDeviceIDs(t *testing.T) {
	for _, uuid := range []string{"GPU-5e1a2b3c-0000-1111-2222-333344445555", "MIG-abc", "x"} {
		for _, n := range []int{0, 1, 78} {
			got, gotN, err := ParseDeviceID(DeviceID(uuid, n))
			if err != nil || got != uuid || gotN != n {
				t.Errorf("ParseDeviceID(DeviceID(%q, %d)) = %q, %d, %v", uuid, n, got, gotN, err)
			}
		}
	}
}

func FuzzParseDeviceID(f *testing.F) {
	for _, s := range []string{"GPU-a::0", "::1", "GPU-a::", "GPU-a::-1", "GPU-a::+5", "GPU-a::05", "a::b::3", "nvidia0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		uuid, n, err := ParseDeviceID(id)
		if err != nil {
			return
		}
		if uuid == "" || n < 0 || DeviceID(uuid, n) != id {
			t.Errorf("ParseDeviceID(%q) = %q, %d, which is not that device", id, uuid, n)
		}
	})
}

// TestDiscoverReport is `--discover` on go-nvml's DGX A100 mock: the report
// in YAML and in JSON says the same, and names what would be published.
func TestDiscoverReport(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		d.(*dgxa100.Device).Config.Name = "NVIDIA A100-SXM4-40GB"
	}
	r, err := Discover(server, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantShare := &allocator.ShareOffer{Resource: ResourceShare, UnitMiB: 40960 / 4, SharesPerGPU: 4}
	if r.Devices[ResourceShare] != 8*4 || r.Capacity["gpuadmit.io/a100-40gb-mib"] != 8*40960 || !cmp.Equal(wantShare, r.Share) {
		t.Errorf("report devices %v capacity %v share %+v; want 32 devices, 327680 MiB, 4 shares of 10240 MiB",
			r.Devices, r.Capacity, r.Share)
	}
	var y, j bytes.Buffer
	if err := r.Write(&y, "yaml"); err != nil {
		t.Fatal(err)
	}
	if err := r.Write(&j, "json"); err != nil {
		t.Fatal(err)
	}
	var fromYAML, fromJSON Report
	if err := yaml.UnmarshalStrict(y.Bytes(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, fromYAML); diff != "" {
		t.Errorf("YAML report (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(r, fromJSON); diff != "" {
		t.Errorf("JSON report (-want +got):\n%s", diff)
	}
	if err := r.Write(&y, "xml"); err == nil {
		t.Error("an unknown output format was accepted")
	}
}

// TestInventoryReadsTheAnnotation holds the agent's annotation and the
// webhook's inventory to one JSON shape: H200s the agent discovered from the
// real readings, published on a MIG node, give the pool NVML's sizes.
func TestInventoryReadsTheAnnotation(t *testing.T) {
	r := readReading(t, "h200.txt")
	gpus, err := Discoverer{NVML: newFakeNVML(r.device("GPU-h200")), Names: r.names}.Discover()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(gpus)
	if err != nil {
		t.Fatal(err)
	}
	n := corev1.Node{}
	n.Name = "h200"
	n.Labels = map[string]string{inventory.LabelProduct: "NVIDIA-H200"}
	n.Annotations = map[string]string{AnnotationGPUs: string(raw)}
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/mig-3g.71gb": resource.MustParse("2")}
	p := inventory.Build([]corev1.Node{n}, nil).Pools[0]
	pr, ok := p.Profile("3g.71gb")
	if p.GPUMemoryMiB != r.MemoryMiB() || !ok || pr.MemoryMiB != 71424 || len(pr.Placements) != 2 {
		t.Errorf("pool GPU %d MiB, 3g.71gb %+v; want the agent's %d MiB and NVML's 71424 MiB with 2 placements", p.GPUMemoryMiB, pr, r.MemoryMiB())
	}
}
