package scale

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gpuadmit/gpuadmit/bench/admission"
)

// Options configure Run. The zero value of every field has a default.
type Options struct {
	// Steps are the numbers of GPU nodes, ascending; nil means 1000, 2500, 5000.
	Steps []int
	// Pods is how many GPU pods each phase creates (four phases a step);
	// zero means 2000. Pods are kept, so the cache grows from step to step.
	Pods int
	// Clients are the concurrent clients creating pods, each its own
	// connection, closed loop; zero means 10.
	Clients int
	// ChurnPeriod is how often churn rewrites each GPU node's
	// nvidia.com/gfd.timestamp; zero means a minute, GFD's default.
	ChurnPeriod time.Duration
	// ChurnWarmup is how long churn runs before a churn phase's first pod;
	// zero means 10 seconds.
	ChurnWarmup time.Duration
	// DRAEvery makes every DRAEvery-th node a DRA node; zero means 5, a
	// negative value none.
	DRAEvery int
	// Probes is how many changes of a taint (each a rebuild) time the
	// inventory rebuild at each step; zero means 6.
	Probes int
	// Fill, when positive, creates that many more pods of one template
	// after the last step, FillChunk at a time, reading the webhook's
	// memory after each chunk: the memory formula's slope in GPU pods, as
	// far as the machine holds. Zero creates none.
	Fill int
	// FillChunk is the pods between two readings of Fill; zero means 10000.
	FillChunk int
	// Root, BinDir: the repository and the control-plane binaries; empty
	// finds them as gpuadmit-bench admission does.
	Root, BinDir string
	// WebhookBinary is a built cmd/webhook; empty builds the repository's.
	WebhookBinary string
	// WebhookMemoryLimit, when positive, is the memory limit in bytes the
	// webhook's process is told it runs under (GPUADMIT_MEMORY_LIMIT, from
	// which it sets the Go runtime's cap) instead of deploy/base's, which
	// is sized for 1,000 DRA nodes and 20,000 GPU pods: the limit the chart
	// sets from the memory formula for the cluster being measured. The
	// controller's process is given the same.
	WebhookMemoryLimit int64
	// LogDir keeps the components' logs; empty means a temporary directory,
	// removed when the run succeeds.
	LogDir string
	// Progress receives a line per step and phase; nil discards them.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if len(o.Steps) == 0 {
		o.Steps = []int{1000, 2500, 5000}
	}
	if !slices.IsSorted(o.Steps) || o.Steps[0] <= 0 {
		return fmt.Errorf("steps %v: want positive numbers of nodes, ascending", o.Steps)
	}
	if o.Pods == 0 {
		o.Pods = 2000
	}
	if o.Pods < 0 {
		return errors.New("pods: want a positive number per phase")
	}
	if o.Clients <= 0 {
		o.Clients = 10
	}
	if o.ChurnPeriod <= 0 {
		o.ChurnPeriod = time.Minute
	}
	if o.ChurnWarmup <= 0 {
		o.ChurnWarmup = 10 * time.Second
	}
	if o.DRAEvery == 0 {
		o.DRAEvery = 5
	}
	if o.Probes <= 0 {
		o.Probes = 6
	}
	if o.FillChunk <= 0 {
		o.FillChunk = 10000
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return admission.ControlPlaneDirs(&o.Root, &o.BinDir)
}
