package agent

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Report is what `gpuadmit-agent --discover` prints: what the agent found
// and what it would publish, without publishing anything.
type Report struct {
	// GPUs is the node annotation's content.
	GPUs []GPU `json:"gpus"`
	// Annotation is the annotation's key.
	Annotation string `json:"annotation"`
	// Capacity is the accounting capacity the agent would advertise.
	Capacity map[string]int64 `json:"capacity"`
	// Devices counts the devices the plugin would serve, by resource.
	Devices map[string]int `json:"devices"`
	// Share is the share annotation's content; nil when no GPU serves shares.
	Share *allocator.ShareOffer `json:"share,omitempty"`
}

// Discover reads the GPUs and reports what the agent would publish and
// serve. It changes nothing, on the node or the GPUs.
func Discover(nv DeviceLister, o Options) (Report, error) {
	o.defaults()
	gpus, err := Discoverer{NVML: nv, Names: o.ProfileNames}.Discover()
	if err != nil {
		return Report{}, fmt.Errorf("discover GPUs: %w", err)
	}
	r := Report{
		GPUs: gpus, Annotation: AnnotationGPUs, Capacity: Accounting(gpus),
		Devices: map[string]int{o.Resource: len(newSnapshot(gpus, int(o.SharesPerGPU)).devices())},
	}
	if offer, ok := shareOffer(gpus, o.Resource, o.SharesPerGPU); ok {
		r.Share = &offer
	}
	return r, nil
}

// Write prints the report as "yaml" or "json".
func (r Report) Write(w io.Writer, format string) error {
	return writeAs(w, r, format)
}

// writeAs prints v as "yaml" or "json".
func writeAs(w io.Writer, v any, format string) error {
	var out []byte
	var err error
	switch format {
	case "yaml", "":
		out, err = yaml.Marshal(v)
	case "json":
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	default:
		return fmt.Errorf("output format %q: want yaml or json", format)
	}
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	_, err = w.Write(out)
	return err
}
