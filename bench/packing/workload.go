package packing

import "math/rand/v2"

// Inflate returns the workload of one run: pods, then pods drawn from pods
// with replacement until the GPU they ask for in all passes ratio × capacity
// (milli-GPU), all shuffled. The same seed gives the same workload.
func Inflate(pods []Pod, capacityMilli int64, ratio float64, seed uint64) []Pod {
	r := newRand(seed)
	out := append([]Pod(nil), pods...)
	var total int64
	for _, p := range pods {
		total += p.GPUMilliTotal()
	}
	target := int64(ratio * float64(capacityMilli))
	for total <= target && hasGPU(pods) {
		p := pods[r.IntN(len(pods))]
		out = append(out, p)
		total += p.GPUMilliTotal()
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func hasGPU(pods []Pod) bool {
	for _, p := range pods {
		if p.GPUs > 0 {
			return true
		}
	}
	return false
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// SampleNodes keeps n of nodes drawn by seed, in their order; all when n is
// 0 or not less than len(nodes). The replay (bench/replay) runs on such a
// sample when the machine cannot hold the whole trace, and the simulator
// takes the same one (Study.Nodes) to compare with it.
func SampleNodes(nodes []Node, n int, seed uint64) []Node {
	if n <= 0 || n >= len(nodes) {
		return nodes
	}
	r := rand.New(rand.NewPCG(seed, ^seed))
	keep := make([]bool, len(nodes))
	for _, i := range r.Perm(len(nodes))[:n] {
		keep[i] = true
	}
	out := make([]Node, 0, n)
	for i, nd := range nodes {
		if keep[i] {
			out = append(out, nd)
		}
	}
	return out
}
