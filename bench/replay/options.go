package replay

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// Options configure Run. The zero value replays the default workload,
// seed 0, on every node of the trace, every configuration, from inside the
// repository; Trace is required.
type Options struct {
	// Trace is the openb trace directory. Required.
	Trace string
	// Workload names the pod list; empty means "default".
	Workload string
	// Seed seeds the workload's resampling and shuffle and the simulator's
	// node order for ties. Default 0; the study uses 42…51.
	Seed uint64
	// Nodes keeps a seeded sample of that many of the trace's nodes, the
	// workload inflated against their capacity; zero means all 1,213.
	Nodes int
	// Configs are the configurations to replay (AllConfigurations); nil
	// means Configurations, those without gpuadmit's webhook.
	Configs []string
	// Root is the repository root; empty means the directory holding
	// go.mod, searched upwards from the working directory.
	Root string
	// BinDir holds the control-plane binaries; empty means
	// $GPUADMIT_E2E_BIN, else <Root>/test/e2e/.bin/v1.37.0.
	BinDir string
	// Scheduler is the gpuadmit-scheduler binary; empty means
	// $GPUADMIT_SCHEDULER_BIN, else one built from <Root>/scheduler.
	Scheduler string
	// LogDir keeps the components' logs, a directory per configuration;
	// empty means a temporary directory, removed when the run succeeds.
	LogDir string
	// Timeout bounds each configuration's scheduling, from the first pod
	// created to the last settled; zero means 9 minutes.
	Timeout time.Duration
	// SchedulerWorkload is the target workload gpuadmit-scheduler is
	// given: WorkloadDerived (empty means it) or WorkloadListed.
	SchedulerWorkload string
	// SchedulerCPUs, when set (taskset's list: 1, 2-3), runs the scheduler
	// under test by itself on those CPUs, and etcd, kube-apiserver and the
	// replay on the others, as a cluster's scheduler does not share its
	// cores with a load generator; empty means everything shares every CPU.
	SchedulerCPUs string
	// MaxPending, when positive, paces the creates: a pod is created only
	// when at most that many of those created are neither bound nor marked
	// unschedulable, so the scheduler places pods about as they arrive, as
	// in a cluster whose pods arrive over days (and as the simulator
	// places them), instead of working through a queue the creates ran
	// ahead of, which the webhook's free-capacity view does not see;
	// zero creates as fast as the API server takes them.
	MaxPending int
	// Progress receives a line per step; nil means none.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if o.Trace == "" {
		return fmt.Errorf("no trace directory")
	}
	if o.Workload == "" {
		o.Workload = "default"
	}
	if len(o.Configs) == 0 {
		o.Configs = slices.Clone(Configurations)
	}
	for _, c := range o.Configs {
		if !slices.Contains(AllConfigurations, c) {
			return fmt.Errorf("configuration %q: want one of %v", c, AllConfigurations)
		}
	}
	switch o.SchedulerWorkload {
	case "":
		o.SchedulerWorkload = WorkloadDerived
	case WorkloadDerived, WorkloadListed:
	default:
		return fmt.Errorf("scheduler workload %q: want %s or %s", o.SchedulerWorkload, WorkloadDerived, WorkloadListed)
	}
	if o.Timeout <= 0 {
		o.Timeout = 9 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := admission.ControlPlaneDirs(&o.Root, &o.BinDir); err != nil {
		return err
	}
	if o.Scheduler == "" {
		o.Scheduler = os.Getenv("GPUADMIT_SCHEDULER_BIN")
	}
	return nil
}
