package allocator

import "fmt"

// BestFit returns the index of the GPU, among free (units of a shared-memory
// resource still free on each GPU), with the fewest free units that still
// holds need units. Filling the fullest GPU that fits first keeps the large
// holes whole for large requests, which is what lets a container always get
// all its memory on one GPU. Ties go to the lower index so the answer never
// depends on anything but free. ok is false when need is not positive or no
// GPU has need units free.
func BestFit(free []int64, need int64) (gpu int, ok bool) {
	if need <= 0 {
		return 0, false
	}
	gpu = -1
	for i, f := range free {
		if f >= need && (gpu < 0 || f < free[gpu]) {
			gpu = i
		}
	}
	return gpu, gpu >= 0
}

// Pack places needs, in order, each on one GPU by BestFit, taking each
// placed need's units off its GPU before the next, and returns the GPU index
// of every need. It does not change free. When a need fits on no GPU, the
// error wraps ErrNoFit and says which need and the most any GPU had left.
func Pack(free []int64, needs []int64) ([]int, error) {
	left := append([]int64(nil), free...)
	out := make([]int, len(needs))
	for i, need := range needs {
		gpu, ok := BestFit(left, need)
		if !ok {
			return nil, fmt.Errorf("%w: need %d of %d units, the most free on one GPU is %d",
				ErrNoFit, i, need, maxOf(left))
		}
		left[gpu] -= need
		out[i] = gpu
	}
	return out, nil
}

func maxOf(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
