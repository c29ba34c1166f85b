package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// MemoryLimitEnv carries the container's memory limit in bytes (the
// Deployment sets it from the downward API, resources.limits.memory).
const MemoryLimitEnv = "GPUADMIT_MEMORY_LIMIT"

// limitShare is the share of the container's memory limit the Go runtime
// keeps its memory under, leaving the rest for what it does not count.
const limitShare = 0.9

// setMemoryLimit caps the Go runtime's memory at limitShare of the
// container's limit, unless GOMEMLIMIT sets a cap itself, and returns the
// cap (0 for none). With the cap in place, the Deployment runs the
// collector less often (GOGC=400): a collection marks the live heap, so
// its CPU per admitted pod falls as the heap may grow between collections,
// and the cap collects early where the limit is near.
func setMemoryLimit() (int64, error) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return 0, nil
	}
	v, ok := os.LookupEnv(MemoryLimitEnv)
	if !ok || v == "" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q: want the memory limit in bytes", MemoryLimitEnv, v)
	}
	goLimit := int64(float64(limit) * limitShare)
	debug.SetMemoryLimit(goLimit)
	return goLimit, nil
}
