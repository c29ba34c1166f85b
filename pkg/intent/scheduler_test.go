package intent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSchedulerAnnotations(t *testing.T) {
	ann := map[string]string{
		"gpu-fraction": "0.5", "gpu-fraction-container-name": "main", "volcano.sh/vgpu-mode": "mig", "volcano.sh/queue-name": "q",
		"hami.io/gpu-scheduler-policy": "binpack", "nvidia.com/use-gputype": "A100", "nvidia.com/numa-bind": "true", "team": "a",
	}
	tests := map[string][]string{
		"kai-scheduler":     {"gpu-fraction", "gpu-fraction-container-name"},
		"volcano":           {"nvidia.com/use-gputype", "volcano.sh/queue-name", "volcano.sh/vgpu-mode"},
		"hami-scheduler":    {"hami.io/gpu-scheduler-policy", "nvidia.com/numa-bind", "nvidia.com/use-gputype"},
		"default-scheduler": nil,
	}
	for scheduler, want := range tests {
		t.Run(scheduler, func(t *testing.T) {
			if diff := cmp.Diff(want, SchedulerAnnotations(scheduler, ann)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
