package allocator

// This file is the built-in catalog. Memory is in MiB as NVML reports it
// (nvidia-smi's "mig -lgip" prints the same value in GiB with two decimals,
// so 4.75 GiB is 4864 MiB and 9.62 GiB is 9856 MiB, i.e. 9.625). NVML's
// profile sizes and totals move a little between driver branches; where the
// sources disagreed the most recent driver's value is used and the comment
// says so. On a real node the agent reads these numbers from NVML instead.

// builtinModels returns the models of Default, freshly allocated.
func builtinModels() []Model {
	return []Model{
		a100Of40GB(), a100Of80GB(), a30(),
		h100SXM(), h100PCIe(), h100NVL(), h200(),
		whole("T4", 15360, 40, "Tesla-T4", "Tesla T4"),
		whole("A10", 23028, 72, "NVIDIA-A10", "NVIDIA A10"),
		whole("L4", 23034, 58, "NVIDIA-L4", "NVIDIA L4"),
		whole("L40S", 46068, 142, "NVIDIA-L40S", "NVIDIA L40S"),
		whole("V100-16GB", 16384, 80,
			"Tesla-V100-SXM2-16GB", "Tesla V100-SXM2-16GB", "Tesla-V100-PCIE-16GB", "Tesla V100-PCIE-16GB"),
		whole("V100-32GB", 32768, 80,
			"Tesla-V100-SXM2-32GB", "Tesla V100-SXM2-32GB", "Tesla-V100-PCIE-32GB", "Tesla V100-PCIE-32GB"),
		whole("P100-16GB", 16384, 56,
			"Tesla-P100-PCIE-16GB", "Tesla P100-PCIE-16GB", "Tesla-P100-SXM2-16GB", "Tesla P100-SXM2-16GB"),
	}
}

// whole describes a GPU without MIG, used whole or in memory shares. Totals
// are nvidia-smi's memory.total with ECC on, as data-center GPUs ship, on
// current drivers (T4 and A10 report 16384 and 24564 MiB with ECC off;
// drivers before about R530 reported 16160 MiB for V100-16GB and 16280 for
// P100-16GB).
func whole(name string, mib int64, sms int, products ...string) Model {
	return Model{Name: name, Products: products, MemoryMiB: mib, SMs: sms}
}

// mig describes one GPU instance profile; every placement is memSlices wide.
func mig(name string, id, compute, memSlices int, mib int64, sms, maxInstances int, starts ...int) Profile {
	p := Profile{
		Name: name, ID: id, ComputeSlices: compute, MemorySlices: memSlices,
		MemoryMiB: mib, SMs: sms, MaxInstances: maxInstances,
	}
	for _, s := range starts {
		p.Placements = append(p.Placements, Placement{Start: s, Size: memSlices})
	}
	return p
}

// gpu8 is a GPU with 8 memory slices and 7 compute slices (A100, H100, H200).
func gpu8(name string, mib int64, sms int, products []string, profiles ...Profile) Model {
	return Model{
		Name: name, Products: products, MemoryMiB: mib, SMs: sms,
		MemorySlices: 8, ComputeSlices: 7, Profiles: profiles,
	}
}

// a100Of40GB: NVIDIA MIG User Guide, "Getting Started with MIG" (nvidia-smi mig
// -lgip and -lgipp on A100-SXM4-40GB, https://docs.nvidia.com/datacenter/tesla/mig-user-guide/).
// Total: nvidia-smi memory.total on current drivers (R450-era ones said 40536 MiB).
func a100Of40GB() Model {
	return gpu8("A100-40GB", 40960, 108, []string{
		"NVIDIA-A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB",
		"A100-SXM4-40GB", "A100-PCIE-40GB",
	},
		mig("1g.5gb", 19, 1, 1, 4864, 14, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.5gb+me", 20, 1, 1, 4864, 14, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb", 15, 1, 2, 9856, 14, 4, 0, 2, 4, 6),
		mig("2g.10gb", 14, 2, 2, 9856, 28, 3, 0, 2, 4),
		mig("3g.20gb", 9, 3, 4, 19968, 42, 2, 0, 4),
		mig("4g.20gb", 5, 4, 4, 19968, 56, 1, 0),
		mig("7g.40gb", 0, 7, 8, 40192, 98, 1, 0),
	)
}

// a100Of80GB: nvidia-smi mig -lgip on A100-SXM4-80GB and A100 80GB PCIe with
// R535+ drivers (9.50, 19.50, 39.25 and 79.00 GiB; R515 printed the same but
// had no 1g.20gb, some older HGX drivers 78.75 GiB for 7g.80gb). Placements as
// on the A100 40GB (MIG User Guide).
func a100Of80GB() Model {
	return gpu8("A100-80GB", 81920, 108, []string{
		"NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA A100 80GB PCIe",
	},
		mig("1g.10gb", 19, 1, 1, 9728, 14, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb+me", 20, 1, 1, 9728, 14, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.20gb", 15, 1, 2, 19968, 14, 4, 0, 2, 4, 6),
		mig("2g.20gb", 14, 2, 2, 19968, 28, 3, 0, 2, 4),
		mig("3g.40gb", 9, 3, 4, 40192, 42, 2, 0, 4),
		mig("4g.40gb", 5, 4, 4, 40192, 56, 1, 0),
		mig("7g.80gb", 0, 7, 8, 80896, 98, 1, 0),
	)
}

// a30: nvidia-smi mig -lgip / -lgipp on an A30 with driver 535.183.01 (5.81,
// 11.69 and 23.44 GiB; the 5952 and 11968 MiB instances show the same in
// nvidia-smi's MIG device list; R470 printed 23.50 GiB for 4g.24gb). The
// profiles are those of the MIG User Guide, "Supported MIG Profiles", A30-24GB.
func a30() Model {
	return Model{
		Name: "A30-24GB", Products: []string{"NVIDIA-A30", "NVIDIA A30"},
		MemoryMiB: 24576, SMs: 56, MemorySlices: 4, ComputeSlices: 4,
		Profiles: []Profile{
			mig("1g.6gb", 14, 1, 1, 5952, 14, 4, 0, 1, 2, 3),
			mig("1g.6gb+me", 21, 1, 1, 5952, 14, 1, 0, 1, 2, 3),
			mig("2g.12gb", 5, 2, 2, 11968, 28, 2, 0, 2),
			mig("2g.12gb+me", 6, 2, 2, 11968, 28, 1, 0, 2),
			mig("4g.24gb", 0, 4, 4, 24000, 56, 1, 0),
		},
	}
}

// h100Profiles are the H100 80GB GPU instance profiles with the SM counts of
// one board: sms lists 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb.
func h100Profiles(sms [6]int) []Profile {
	return []Profile{
		mig("1g.10gb", 19, 1, 1, 9984, sms[0], 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.10gb+me", 20, 1, 1, 9984, sms[0], 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.20gb", 15, 1, 2, 20096, sms[1], 4, 0, 2, 4, 6),
		mig("2g.20gb", 14, 2, 2, 20096, sms[2], 3, 0, 2, 4),
		mig("3g.40gb", 9, 3, 4, 40448, sms[3], 2, 0, 4),
		mig("4g.40gb", 5, 4, 4, 40448, sms[4], 1, 0),
		mig("7g.80gb", 0, 7, 8, 81152, sms[5], 1, 0),
	}
}

// h100SXM is the NVML reading in testdata/nvml/h100-80gb-hbm3-raw.txt
// (driver 580.159.04); TestCatalogMatchesNVMLReadings keeps it so.
func h100SXM() Model {
	return gpu8("H100-80GB", 81559, 132, []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"},
		h100Profiles([6]int{16, 26, 32, 60, 64, 132})...)
}

// h100PCIe has the memory of the SXM board but 114 SMs, so its profiles
// have fewer SMs: nvidia-smi mig -lgip on an H100 PCIe, driver 570.169
// (memory.total 81559 MiB, 1g.10gb instances of 9984 MiB).
func h100PCIe() Model {
	return gpu8("H100-PCIE-80GB", 81559, 114, []string{"NVIDIA-H100-PCIe", "NVIDIA H100 PCIe"},
		h100Profiles([6]int{14, 14, 30, 46, 62, 114})...)
}

// h100NVL: nvidia-smi mig -lgip / -lgipp on an H100 NVL, driver 560.35.03
// (10.75, 21.62, 46.38 and 93.12 GiB, memory.total 95830 MiB; the MIG device
// list shows the same 11008, 22144 and 47488 MiB). Placements also in NVIDIA's
// blog on MIG with the H100 NVL.
func h100NVL() Model {
	return gpu8("H100-94GB", 95830, 132, []string{"NVIDIA-H100-NVL", "NVIDIA H100 NVL"},
		mig("1g.12gb", 19, 1, 1, 11008, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.12gb+me", 20, 1, 1, 11008, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.24gb", 15, 1, 2, 22144, 26, 4, 0, 2, 4, 6),
		mig("2g.24gb", 14, 2, 2, 22144, 32, 3, 0, 2, 4),
		mig("3g.47gb", 9, 3, 4, 47488, 60, 2, 0, 4),
		mig("4g.47gb", 5, 4, 4, 47488, 64, 1, 0),
		mig("7g.94gb", 0, 7, 8, 95360, 132, 1, 0),
	)
}

// h200 is the NVML reading in testdata/nvml/h200.txt (driver 580.159.04);
// TestCatalogMatchesNVMLReadings keeps it so. (Older drivers printed 32.25
// and 69.50 GiB where this one reads 33280 and 71424 MiB.)
func h200() Model {
	return gpu8("H200-141GB", 143771, 132, []string{"NVIDIA-H200", "NVIDIA H200"},
		mig("1g.18gb", 19, 1, 1, 16384, 16, 7, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.18gb+me", 20, 1, 1, 16384, 16, 1, 0, 1, 2, 3, 4, 5, 6),
		mig("1g.35gb", 15, 1, 2, 33280, 26, 4, 0, 2, 4, 6),
		mig("2g.35gb", 14, 2, 2, 33280, 32, 3, 0, 2, 4),
		mig("3g.71gb", 9, 3, 4, 71424, 60, 2, 0, 4),
		mig("4g.71gb", 5, 4, 4, 71424, 64, 1, 0),
		mig("7g.141gb", 0, 7, 8, 143360, 132, 1, 0),
	)
}
