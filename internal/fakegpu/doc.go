// Package fakegpu stands in for a GPU node's NVIDIA driver where there is
// no GPU: NVML devices (go-nvml's mock) that answer as the real GPUs whose
// readings are in pkg/allocator/testdata/nvml did, the NVML calls nvcdi
// and go-nvlib make to write CDI specs (of MIG devices too), a driver root
// on disk that nvcdi accepts (device nodes, MIG capability nodes,
// versioned libraries, nvidia-cdi-hook), and the driver's MIG minors file
// that nvcdi reads from /proc/driver (caps.go).
//
// The unit tests of pkg/agent use its pieces directly. cmd/agent links it
// only under the build tag gpuadmit_fakenvml (the real-node tests' agent
// image, test/e2e/node): there Load reads a node's GPUs from a
// configuration file, and a control file the test edits changes them while
// the agent runs. The shipped agent does not link this package
// (cmd/agent's TestShippedAgentLinksNoFake).
package fakegpu
