package replay

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// SimPolicies are the simulator's policies reported beside the replay.
var SimPolicies = []string{"gpuadmit", "gpuadmit-firstfit", "fgd", "bestfit", "bestfit-firstfit"}

// Arrived are the arrival points reported: 50% to 100% of capacity.
func Arrived() []float64 {
	var out []float64
	for _, a := range packing.DefaultArrived() {
		if a <= 1 {
			out = append(out, a)
		}
	}
	return out
}

// Simulated is one policy's run in the simulator on the replayed workload.
type Simulated struct {
	Policy string          `json:"policy"`
	Points []packing.Point `json:"points"`
	Failed int             `json:"failed"`
}

// Simulate runs the simulator's policies on w with seed, as
// packing.RunStudy runs them, on the pods the replay creates.
func Simulate(w Workload, seed uint64, policies []string) ([]Simulated, error) {
	out := make([]Simulated, 0, len(policies))
	for _, name := range policies {
		p, err := packing.NewPolicy(name, w.Listed, w.Nodes)
		if err != nil {
			return nil, err
		}
		run := packing.Simulate(packing.NewCluster(w.Nodes), w.Pods, p, packing.Options{Seed: seed, Arrived: Arrived()})
		if len(run.Points) == 0 {
			return nil, fmt.Errorf("simulate %s: the workload never reached 50%% of capacity", name)
		}
		out = append(out, Simulated{Policy: name, Points: run.Points, Failed: run.Failed})
	}
	return out, nil
}
