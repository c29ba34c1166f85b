//go:build !gpuadmit_fakenvml

package main

// bindNVMLFlags registers no flag: the shipped agent reads the driver's
// NVML only (see fakenvml.go for the test build's).
func bindNVMLFlags(*flags) {}

// useNVML leaves the options on the driver's NVML.
func useNVML(*flags) error { return nil }
