package placement_test

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	metrics.Register() // the framework records plugin metrics from its first cycle
	os.Exit(m.Run())
}
