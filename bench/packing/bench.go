package packing

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Ratio is how far the protocol inflates a workload: until the GPU it asks
// for passes 130% of the cluster's capacity.
const Ratio = 1.3

// Study names one run of the study.
type Study struct {
	// Trace is the trace directory (openb). Required.
	Trace string
	// Workload names the pod list ("default" reads openb_pod_list_default.csv). Required.
	Workload string
	// Policy is one of Policies. Required.
	Policy string
	// Cluster is the node list in Trace. Default NodeFile (the GPU nodes).
	Cluster string
	// Seed seeds the workload's resampling and shuffle and the policy's
	// random choices. Default 0; the protocol uses 42…51.
	Seed uint64
	// Nodes keeps a sample of that many of the cluster's nodes, drawn by
	// Seed as the replay draws its own (SampleNodes), the workload
	// inflated against their capacity. Default 0: every node.
	Nodes int
}

// Result is what a run reports, as `gpuadmit-bench packing -o json` prints it.
type Result struct {
	Policy        string  `json:"policy"`
	Workload      string  `json:"workload"`
	Seed          uint64  `json:"seed"`
	Points        []Point `json:"points"`
	DecisionP50us float64 `json:"decisionP50us"`
	DecisionP99us float64 `json:"decisionP99us"`
}

// RunStudy loads the trace, inflates the workload and simulates it.
func RunStudy(s Study) (Result, error) {
	nodes, err := LoadNodes(s.Trace, s.Cluster)
	if err != nil {
		return Result{}, fmt.Errorf("load cluster: %w", err)
	}
	nodes = SampleNodes(nodes, s.Nodes, s.Seed)
	pods, err := LoadPods(s.Trace, s.Workload)
	if err != nil {
		return Result{}, fmt.Errorf("load workload: %w", err)
	}
	policy, err := NewPolicy(s.Policy, pods, nodes)
	if err != nil {
		return Result{}, err
	}
	c := NewCluster(nodes)
	run := Simulate(c, Inflate(pods, c.CapacityMilli(), Ratio, s.Seed), policy, Options{Seed: s.Seed})
	return Result{Policy: s.Policy, Workload: s.Workload, Seed: s.Seed, Points: run.Points,
		DecisionP50us: micros(Percentile(run.Decisions, 0.50)),
		DecisionP99us: micros(Percentile(run.Decisions, 0.99))}, nil
}

// Percentile is the nearest-rank q-quantile of ds (0 when empty).
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
