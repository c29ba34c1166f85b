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
