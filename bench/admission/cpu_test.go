package admission

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stat is a /proc/<pid>/stat line with utime and stime in clock ticks.
func stat(pid int, comm string, ppid, utime, stime int) string {
	return fmt.Sprintf("%d (%s) S %d %d 0 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 12 0 1000 0 0", pid, comm, ppid, pid, utime, stime)
}

func TestAttribute(t *testing.T) {
	const self = 100
	tests := map[string]struct {
		stats []string
		want  map[string]float64
	}{
		"the bench holds the clients, each webhook server is its own child": {
			stats: []string{
				stat(self, "gpuadmit-bench", 1, 150, 50),
				stat(101, "kube-apiserver", self, 900, 100),
				stat(102, "etcd", self, 300, 100),
				stat(103, "gpuadmit", self, 250, 50),
				stat(104, "noop-webhook", self, 80, 20),
				stat(105, "opa", self, 400, 0),
				stat(106, "kube-controller", self, 10, 0),
			},
			want: map[string]float64{"bench": 2, "kube-apiserver": 10, "etcd": 4, "gpuadmit": 3, "noop-webhook": 1, "opa": 4, "kube-controller": 0.1},
		},
		"other processes and grandchildren are not ours": {
			stats: []string{
				stat(self, "admission.test", 1, 100, 0),
				stat(103, "gpuadmit", self, 100, 0),
				stat(200, "gpuadmit", 1, 5000, 0),      // another engineer's webhook
				stat(201, "go", 103, 700, 0),           // a child of a child
				stat(202, "kube-apiserver", 1, 900, 0), // another cluster
			},
			want: map[string]float64{"bench": 1, "gpuadmit": 1},
		},
		"two children of one name add up; unreadable lines are skipped": {
			stats: []string{
				stat(self, "gpuadmit-bench", 1, 0, 0),
				stat(103, "gpuadmit", self, 100, 0),
				stat(107, "gpuadmit", self, 0, 100),
				"107 (truncated",
			},
			want: map[string]float64{"bench": 0, "gpuadmit": 2},
		},
		"a comm with spaces and parentheses": {
			stats: []string{stat(self, "bench", 1, 0, 0), stat(108, "odd) (name", self, 100, 0)},
			want:  map[string]float64{"bench": 0, "odd) (name": 1},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, attribute(self, tt.stats)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
