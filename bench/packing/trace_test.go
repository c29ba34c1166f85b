package packing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeTrace(t *testing.T, nodes, pods string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{NodeFile: nodes, PodFile("test"): pods} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	dir := writeTrace(t, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n",
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,12000,16384,1,1000,,LS\np1,8000,30517,1,460,V100M16|V100M32,BE\n")
	nodes, err := LoadNodes(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	pods, err := LoadPods(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Node{{Name: "n0", MilliCPU: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100"}}, nodes); diff != "" {
		t.Errorf("nodes (-want +got)\n%s", diff)
	}
	want := []Pod{
		{Name: "p0", MilliCPU: 12000, MemoryMiB: 16384, GPUs: 1, GPUMilli: 1000},
		{Name: "p1", MilliCPU: 8000, MemoryMiB: 30517, GPUs: 1, GPUMilli: 460, Spec: "V100M16|V100M32"},
	}
	if diff := cmp.Diff(want, pods); diff != "" {
		t.Errorf("pods (-want +got)\n%s", diff)
	}
}

func TestLoadPodsErrors(t *testing.T) {
	tests := map[string]struct {
		pods string
		want string
	}{
		"missing column":        {pods: "name,cpu_milli,memory_mib,num_gpu\n", want: ":1: header lacks column gpu_milli"},
		"not an integer":        {pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\np1,x,1,1,1000\n", want: ":3: column cpu_milli"},
		"share of several GPUs": {pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,2,500\n", want: ":2: num_gpu 2 with gpu_milli 500"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeTrace(t, "sn,cpu_milli,memory_mib,gpu,model\n", tc.pods)
			_, err := LoadPods(dir, "test")
			if err == nil || !strings.Contains(err.Error(), PodFile("test")+tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, PodFile("test")+tc.want)
			}
		})
	}
}

func TestTypicalTasks(t *testing.T) {
	got := TypicalTasks(testWorkload, typicalShare)
	var weights []float64
	for _, k := range got {
		weights = append(weights, k.Weight)
	}
	if diff := cmp.Diff([]float64{0.5, 0.25, 0.25}, weights); diff != "" {
		t.Errorf("weights (-want +got)\n%s", diff)
	}
}
