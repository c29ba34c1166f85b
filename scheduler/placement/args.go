package placement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Args are GPUAdmit's arguments (pluginConfig args in a
// KubeSchedulerConfiguration). The zero value derives the target workload
// from the GPU pods the profile schedules.
type Args struct {
	// Workload is the target workload the fragmentation measure is computed
	// over: the kinds of request the cluster expects, each with its weight.
	// Empty (the default) derives it from the GPU pods of this profile that
	// the scheduler knows, pending and running, one kind per distinct
	// request, weighted by how many pods ask it. Set it to a workload known
	// in advance (a trace's kinds, say), which also keeps the score of a
	// node independent of other pods' arrivals, so GPU pods can be batched
	// (see SignPod).
	Workload []Kind `json:"workload,omitempty"`
	// RecordNamespace holds gpuadmit's record of the pools
	// gpuadmit-scheduler may own (the ConfigMap gpuadmit-scheduler-pools);
	// empty means DefaultRecordNamespace. The plugin refuses a pod gpuadmit
	// placed on a pool the record does not give gpuadmit-scheduler.
	RecordNamespace string `json:"recordNamespace,omitempty"`
}

func (a Args) recordNamespace() string {
	if a.RecordNamespace == "" {
		return DefaultRecordNamespace
	}
	return a.RecordNamespace
}

// Kind is one kind of request of the target workload. At most one of
// GPUMemory, Shares and GPUs is set; none is a pod without GPU, whose CPU
// competes with GPU pods for the same nodes.
type Kind struct {
	// CPU and Memory are the pod's requests; zero counts none.
	CPU    resource.Quantity `json:"cpu,omitempty"`
	Memory resource.Quantity `json:"memory,omitempty"`
	// GPUMemory is a share of one GPU's memory (a DRA claim of
	// gpu-share.gpuadmit.io), as the claim asks it.
	GPUMemory *resource.Quantity `json:"gpuMemory,omitempty"`
	// Shares is a number of units of a device-plugin pool's share resource
	// (gpuadmit.io/gpu-mem), on one GPU.
	Shares int64 `json:"shares,omitempty"`
	// GPUs is a number of whole GPUs.
	GPUs int `json:"gpus,omitempty"`
	// Models are the GPU models a GPU kind accepts (as gpuadmit's agent
	// names them: the model attribute of its devices, or of its share
	// offer); empty accepts any. The scarcity price weighs the kinds that
	// accept some models only against the cluster's GPUs of those models,
	// as it weighs derived pods pinned by their node constraints or their
	// claims' model selectors.
	Models []string `json:"models,omitempty"`
	// Weight is the kind's popularity; weights need not sum to 1.
	Weight float64 `json:"weight"`
}

// decodeArgs reads the plugin's args (runtime.Unknown from the
// configuration file; nil when it has none) and validates them.
func decodeArgs(obj runtime.Object) (Args, error) {
	var args Args
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return Args{}, fmt.Errorf("decode %s args: %w", Name, err)
	}
	if errs := args.validate(); len(errs) > 0 {
		return Args{}, fmt.Errorf("%s args: %w", Name, errs.ToAggregate())
	}
	return args, nil
}

func (a Args) validate() field.ErrorList {
	var errs field.ErrorList
	for i, k := range a.Workload {
		p := field.NewPath("workload").Index(i)
		set := 0
		if k.GPUMemory != nil {
			set++
			if k.GPUMemory.Sign() <= 0 {
				errs = append(errs, field.Invalid(p.Child("gpuMemory"), k.GPUMemory.String(), "must be positive"))
			}
		}
		if k.Shares != 0 {
			set++
			if k.Shares < 0 {
				errs = append(errs, field.Invalid(p.Child("shares"), k.Shares, "must be positive"))
			}
		}
		if k.GPUs != 0 {
			set++
			if k.GPUs < 0 {
				errs = append(errs, field.Invalid(p.Child("gpus"), k.GPUs, "must be positive"))
			}
		}
		if set == 0 && len(k.Models) > 0 {
			errs = append(errs, field.Invalid(p.Child("models"), k.Models, "a kind without GPU accepts no GPU model"))
		}
		for j, m := range k.Models {
			if m == "" {
				errs = append(errs, field.Invalid(p.Child("models").Index(j), m, "must not be empty"))
			}
		}
		if set > 1 {
			errs = append(errs, field.Invalid(p, k, "set at most one of gpuMemory, shares and gpus"))
		}
		if k.Weight <= 0 {
			errs = append(errs, field.Invalid(p.Child("weight"), k.Weight, "must be positive"))
		}
		if k.CPU.Sign() < 0 || k.Memory.Sign() < 0 {
			errs = append(errs, field.Invalid(p, k, "cpu and memory must not be negative"))
		}
	}
	return errs
}
