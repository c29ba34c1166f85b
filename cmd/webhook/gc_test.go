package main

import (
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // leave it as found
	t.Setenv(MemoryLimitEnv, "268435456")
	got, err := setMemoryLimit()
	if err != nil || got != 241591910 || debug.SetMemoryLimit(-1) != 241591910 {
		t.Errorf("256 MiB limit: cap %d, err %v, runtime %d; want 90%%, 241591910", got, err, debug.SetMemoryLimit(-1))
	}
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got, err := setMemoryLimit(); got != 0 || err != nil {
		t.Errorf("with GOMEMLIMIT set: cap %d, err %v; want it left alone", got, err)
	}
}

func TestSetMemoryLimitRefusesNonsense(t *testing.T) {
	for _, v := range []string{"256Mi", "-1", "0"} {
		t.Setenv(MemoryLimitEnv, v)
		if got, err := setMemoryLimit(); err == nil || got != 0 {
			t.Errorf("%s=%q: cap %d, err %v; want an error", MemoryLimitEnv, v, got, err)
		}
	}
}
