package allocator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTaskFragment(t *testing.T) {
	node := FragNode{MilliCPULeft: 8000, GPUMilliLeft: []int64{1000, 500, 200, 0}, Model: "T4"}
	tests := map[string]struct {
		node FragNode
		task FragTask
		want int64
	}{
		"half GPU: only the 200 left is a fragment":  {node: node, task: FragTask{MilliCPU: 1000, GPUMilli: 500, GPUs: 1}, want: 200},
		"whole GPU: both partial GPUs are fragments": {node: node, task: FragTask{MilliCPU: 1000, GPUMilli: 1000, GPUs: 1}, want: 700},
		"two whole GPUs do not fit: all idle":        {node: node, task: FragTask{MilliCPU: 1000, GPUMilli: 1000, GPUs: 2}, want: 1700},
		"CPU short: all idle":                        {node: node, task: FragTask{MilliCPU: 9000, GPUMilli: 100, GPUs: 1}, want: 1700},
		"task without GPU: all idle":                 {node: node, task: FragTask{MilliCPU: 1000}, want: 1700},
		"model refused: all idle":                    {node: node, task: FragTask{MilliCPU: 1000, GPUMilli: 100, GPUs: 1, Spec: "V100M16|P100"}, want: 1700},
		"model accepted among several":               {node: node, task: FragTask{MilliCPU: 1000, GPUMilli: 100, GPUs: 1, Spec: "P100|T4"}, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TaskFragment(tc.node, tc.task)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestFragmentation(t *testing.T) {
	tasks := []FragTask{
		{MilliCPU: 1000, GPUMilli: 500, GPUs: 1, Weight: 0.5},
		{MilliCPU: 1000, GPUMilli: 1000, GPUs: 1, Weight: 0.5},
	}
	tests := map[string]struct {
		node FragNode
		want float64
	}{
		"idle GPUs are no fragment":     {node: FragNode{MilliCPULeft: 4000, GPUMilliLeft: []int64{1000, 1000}}, want: 0},
		"a 300 hole is lost to both":    {node: FragNode{MilliCPULeft: 4000, GPUMilliLeft: []int64{1000, 300}}, want: 300},
		"a 600 hole serves half GPUs":   {node: FragNode{MilliCPULeft: 4000, GPUMilliLeft: []int64{1000, 600}}, want: 300},
		"no GPU left, no fragmentation": {node: FragNode{MilliCPULeft: 0, GPUMilliLeft: []int64{0, 0}}, want: 0},
		"no CPU left: every share lost": {node: FragNode{MilliCPULeft: 0, GPUMilliLeft: []int64{1000, 600}}, want: 1600},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Fragmentation(tc.node, tasks)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
