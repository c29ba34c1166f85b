//go:build gpuadmit_fakenvml

package main

import (
	"flag"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// This file is the agent of the real-node tests (test/e2e/node), built with
// -tags gpuadmit_fakenvml: --fake-nvml names a fakegpu configuration whose
// GPUs the agent finds instead of the driver's. The shipped agent has
// neither the flag nor package fakegpu (TestShippedAgentLinksNoFake).

// bindNVMLFlags registers --fake-nvml.
func bindNVMLFlags(f *flags) {
	flag.StringVar(&f.fakeNVML, "fake-nvml", "", "TEST BUILD: a fakegpu configuration (JSON) whose GPUs NVML reports instead of the driver's")
}

// useNVML points every mode at the fake NVML when --fake-nvml is set.
func useNVML(f *flags) error {
	if f.fakeNVML == "" {
		return nil
	}
	// Loaded once, up front, so a configuration error stops the agent at start.
	node, err := fakegpu.Load(f.fakeNVML)
	if err != nil {
		return err
	}
	// nvcdi reads MIG capabilities from /proc/driver whatever the driver
	// root: the fake one goes there, in this container alone.
	if node.ProcDriver != "" {
		if err := fakegpu.MountProcDriver(node.ProcDriver); err != nil {
			return err
		}
	}
	open := func(cdi.Options) (nvml.Interface, func(), error) {
		if err := nvmlError(node.Init()); err != nil {
			return nil, nil, err
		}
		return node, func() { _ = node.Shutdown() }, nil
	}
	f.agent.OpenNVML, f.agent.ProfileNames = open, fakegpu.ProfileName
	return nil
}

func nvmlError(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
}
